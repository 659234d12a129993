/* report_failure: a stand-in kernel whose result never validates on one chosen rank, so tests
   can check the contract's failure path (docs/kernel-contract.md: an `ERROR: <what>` validation
   line, exit code 1 on every rank, JSON validation.ok = false) through the same src/common/ code
   the kernels use, without a fault-injection switch in the kernels themselves.

   usage: report_failure [--fail-rank R] [--json FILE]   (R: the rank whose check fails, default 0) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "json.h"
#include "report.h"

static const char *ALLOWED = "--fail-rank R (0..ranks-1), --json FILE";

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long long fail_rank = 0;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fail-rank"))
            fail_rank = hpc_arg_ll(argv[i], hpc_arg_value(argc, argv, &i, ALLOWED), 0, size - 1,
                                   "0..ranks-1");
        else if (!strcmp(argv[i], "--json"))
            json = hpc_arg_value(argc, argv, &i, ALLOWED);
        else
            hpc_usage_error(argv[i], "unknown argument", ALLOWED);
    }
    if (json) hpc_check_json_path(json);

    /* The "computation": every rank sums 1..100 and checks it against n(n+1)/2, except that
       the failing rank is off by one, as a real kernel with a bug would be. */
    long long sum = 0;
    for (long long k = 1; k <= 100; k++) sum += k;
    if (rank == fail_rank) sum += 1;
    const long long expected = 100 * 101 / 2;

    hpc_report rep;
    hpc_report_init(&rep, "report_failure",
                    "test program for the contract's failure path; not a benchmark", argc, argv, 1);
    rep.json_path = json;
    hpc_kv_int(&rep, "fail_rank", fail_rank);
    hpc_report_placement(&rep, 0);
    hpc_report_header(&rep);
    char msg[128];
    snprintf(msg, sizeof msg, "sum is %lld, expected %lld", sum, expected);
    hpc_report_validation(&rep, sum == expected, msg);

    hpc_json res;
    js_init(&res);
    if (rank == 0) {
        printf("sum = %lld\n", sum);
        js_obj_open(&res, NULL);
        js_int(&res, "sum_rank0", sum);
        js_obj_close(&res);
        fflush(stdout);
    }
    int code = hpc_report_finish(&rep, res.buf);
    js_free(&res);
    MPI_Finalize();
    return code;
}
