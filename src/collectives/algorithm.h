/* What the MPI library says about the collective algorithms of THIS run, and how the kernel
   switches them between variants. Everything goes through the MPI tools interface (MPI_T):
   - readback: the control variables that choose an algorithm, read after MPI_Init, so the report
     shows the value the library itself holds (it parsed the environment), not what the job asked:
     Open MPI's coll_tuned_use_dynamic_rules, coll_tuned_<op>_algorithm (an MPI_T enum, so its
     name comes from the library too) and coll_han_priority; MPICH's MPIR_CVAR_<OP>_INTRA_ALGORITHM
     (an int; its names are the order `mpivars` lists, see hpclab/site/mpi_libraries.py);
   - variants: a list of name=value writes made through MPI_T before a communicator is duplicated
     (Open MPI copies its forced algorithm into a communicator's module when the communicator is
     made; MPICH reads its CVAR at every call), so one job can compare algorithms round by round.
   A library without such variables (Intel MPI: I_MPI_ADJUST_* are environment variables only)
   reports none, and the Python side reads its own debug output instead. */
#ifndef HPCLAB_COLL_ALGORITHM_H
#define HPCLAB_COLL_ALGORITHM_H
#include <mpi.h>
#include <stddef.h>

#define HPC_MAX_WRITES 4

typedef struct {
    char name[96];
    long long value;
} hpc_cvar_write;

typedef struct {
    char label[256];                    /* as given on the command line ("default" for none) */
    int nwrites;
    hpc_cvar_write writes[HPC_MAX_WRITES];
} hpc_variant;

typedef struct {
    char name[96];  /* the control variable, "" when the library has none for this op */
    long long value;
    char text[64];  /* the enum's name for the value when the library gives one, else "" */
} hpc_cvar_said;

/* Start/stop MPI_T (once per run). 0 when MPI_T is usable. */
int hpc_mpit_start(void);
void hpc_mpit_stop(void);

/* Parse "NAME=V[,NAME=V...]" (or "default") into v; 0 on success, -1 with why filled in. */
int hpc_variant_parse(const char *text, hpc_variant *v, char *why, size_t n);

/* Read every variable a variant writes (its value before any write), so that variants not naming
   a variable leave it as the run started. 0 on success, -1 when a name is unknown to MPI_T. */
int hpc_cvar_read_int(const char *name, long long *value);

/* Write the variant's variables, and restore the start values `base` (same order as
   all_names) of the ones it does not name. 0 on success; -1 with why filled in. */
int hpc_variant_apply(const hpc_variant *v, char names[][96], const long long *base, int nnames,
                      char *why, size_t n);

/* The algorithm control variable of `op` ("allreduce", ...) and its value; name "" if none. */
void hpc_cvar_said_for(const char *op, hpc_cvar_said *out);

/* A library-wide switch that gates the per-op ones (Open MPI: coll_tuned_use_dynamic_rules). */
void hpc_cvar_gate(hpc_cvar_said *out);

/* The function that serves `op` on `comm`, named by the dynamic linker (Open MPI's internal
   headers at build time only: HPCLAB_OMPI_INTERNALS); "" when unknown. */
void hpc_coll_function(MPI_Comm comm, const char *op, char *out, size_t n);

#endif
