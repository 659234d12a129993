/* mistake: block length and stride swapped: cols doubles per block, one apart, overrun the array
   feedback: element \(1, 0\), outside the received column, changed: it holds rank \d's element \(0, 1\) */
#include <mpi.h>

MPI_Datatype make_column(int rows, int cols)
{
    MPI_Datatype column;
    MPI_Type_vector(rows, cols, 1, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    return column;
}

void pack_column(const double *a, int rows, int cols, int col, double *buf)
{
    for (int i = 0; i < rows; i++) buf[i] = a[(long)i * cols + col];
}

void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    for (int i = 0; i < rows; i++) a[(long)i * cols + col] = buf[i];
}
