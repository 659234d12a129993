/* mistake: an index mix-up in the packing: a[col * rows + i] reads along a row instead of down the column
   feedback: manual packing, .*rows and columns swapped */
#include <mpi.h>

MPI_Datatype make_column(int rows, int cols)
{
    MPI_Datatype column;
    MPI_Type_vector(rows, 1, cols, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    return column;
}

void pack_column(const double *a, int rows, int cols, int col, double *buf)
{
    (void)cols;
    for (int i = 0; i < rows; i++) buf[i] = a[(long)col * rows + i];
}

void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    for (int i = 0; i < rows; i++) a[(long)i * cols + col] = buf[i];
}
