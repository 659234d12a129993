/* mpitrace.h - the user-facing API of the hpclab PMPI tracer (libmpitrace.so).
 *
 * Programs may call these directly (link with -lmpitrace) or declare them weak, as
 * src/poisson does, so that they become live only when the library is LD_PRELOADed.
 * Calls before MPI_Init or after MPI_Finalize are ignored.
 */
#ifndef MPITRACE_H
#define MPITRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Open a user region named `name` (recorded as a region_begin event). Names are interned
 * per rank; pass the same string for the matching mpitrace_end. */
void mpitrace_begin(const char *name);

/* Close the region opened with the same name (recorded as a region_end event). */
void mpitrace_end(const char *name);

/* Write the buffered events of this rank to its trace file now. */
void mpitrace_flush(void);

#ifdef __cplusplus
}
#endif
#endif
