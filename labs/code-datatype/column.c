/* The derived datatype lab: one column of a row-major array, sent two ways.

   a is a rows x cols array of doubles stored row by row: element (i, j) is a[i * cols + j], so
   the elements of one column lie cols doubles apart. The driver (main.c) swaps column 0 of each
   rank's array with its partner's, into the partner's last column, twice per round:
     - with the type make_column() returns: MPI_Sendrecv(a + 0, 1, type, ..., a + cols - 1, 1, type, ...)
     - with manual packing: pack_column() copies the column into a contiguous buffer, the buffer
       travels as rows MPI_DOUBLEs, and unpack_column() copies it into the column.
   It checks every element that arrived (and that nothing else changed) and times both ways.

   Write the three functions: make_column() with MPI_Type_vector (and MPI_Type_commit: the driver
   frees the type when it is done), pack_column() and unpack_column() with plain loops. */
#include <mpi.h>

/* A committed datatype for one column of a rows x cols array of doubles. */
MPI_Datatype make_column(int rows, int cols)
{
    MPI_Datatype column = MPI_DATATYPE_NULL;
    /* BEGIN SOLUTION */
    MPI_Type_vector(rows, 1, cols, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    /* END SOLUTION */
    /* BEGIN STARTER
    (void)rows;
    (void)cols;
    END STARTER */
    return column;
}

/* buf[i] = element (i, col) of a, for every row i. */
void pack_column(const double *a, int rows, int cols, int col, double *buf)
{
    /* BEGIN SOLUTION */
    for (int i = 0; i < rows; i++) buf[i] = a[(long)i * cols + col];
    /* END SOLUTION */
    /* BEGIN STARTER
    (void)a, (void)rows, (void)cols, (void)col, (void)buf;
    END STARTER */
}

/* Element (i, col) of a = buf[i], for every row i. */
void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    /* BEGIN SOLUTION */
    for (int i = 0; i < rows; i++) a[(long)i * cols + col] = buf[i];
    /* END SOLUTION */
    /* BEGIN STARTER
    (void)a, (void)rows, (void)cols, (void)col, (void)buf;
    END STARTER */
}
