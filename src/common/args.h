/* Command-line handling shared by the kernels.
   Every rank parses the same argv, so every rank finds the same mistake without talking to the
   others; rank 0 alone prints the one-line error, then all ranks MPI_Finalize and exit(2). */
#ifndef HPCLAB_ARGS_H
#define HPCLAB_ARGS_H

#define HPC_EXIT_USAGE 2   /* bad input */
#define HPC_EXIT_INVALID 1 /* result did not validate */

/* Print "ERROR: <arg>: <what>; allowed: <allowed>" on rank 0 (stderr), finalize, exit(2). */
void hpc_usage_error(const char *arg, const char *what, const char *allowed)
    __attribute__((noreturn));

/* Collective: if any rank passes bad != 0, every rank exits(2) after rank 0 prints the message
   of the lowest bad rank (messages can differ per rank, e.g. memory on different hosts). */
void hpc_agree_usage_error(int bad, const char *arg, const char *what, const char *allowed);

/* The value after option argv[*i]; advances *i. Missing value: usage error. */
const char *hpc_arg_value(int argc, char **argv, int *i, const char *allowed);

/* Whole-string integer / real number within [lo, hi]; anything else is a usage error naming arg. */
long long hpc_arg_ll(const char *arg, const char *text, long long lo, long long hi,
                     const char *allowed);
double hpc_arg_double(const char *arg, const char *text, double lo, double hi,
                      const char *allowed);

/* Bytes of memory available to new allocations on this host (MemAvailable), 0 if unknown. */
unsigned long long hpc_mem_available(void);

/* Number of ranks of MPI_COMM_WORLD on this rank's host (collective). */
int hpc_ranks_on_host(void);

#endif
