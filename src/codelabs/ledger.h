/* The request ledger of the code labs: every request an MPI_Isend, MPI_Issend or MPI_Irecv of
   the program starts, until a wait, a successful test or MPI_Request_free ends it. Linked into
   a code lab's program, it wraps those calls through MPI's profiling interface (PMPI_*), so a
   request the student's code never completes is named with the call that started it. */
#ifndef CODELAB_LEDGER_H
#define CODELAB_LEDGER_H

/* Requests started and not yet completed by this rank. */
int ledger_pending(void);

/* Writes one line naming the pending requests into buf: how many each call site left open (at
   most 8 sites, as "3 from MPI_Isend at <program>+0x<offset>", which addr2line turns into
   file:line). */
void ledger_describe(char *buf, int size);

#endif
