/* NumPy .npy files: the tensors users capture from their own runs (activations, router outputs,
 * weights) and the outputs tilelab writes back for them.
 *
 * Read: format versions 1.0, 2.0 and 3.0, C order, little-endian element types
 *   '<f4' float32, '<f2' float16, '<u2' bfloat16 stored as its uint16 bits, '<i4' int32, '|u1' uint8
 *   (codes of a packed format), at most TL_NPY_MAX_DIM dimensions. A scalar (shape ()) has one element.
 * The header must be numpy's dict: exactly the keys 'descr', 'fortran_order' (True or False) and
 * 'shape' (a tuple), each once, as numpy's own reader demands.
 * Anything else (a bad magic, a truncated header or body, another header key or one given twice,
 * a fortran_order that is not True or False, Fortran order, a big-endian or unknown dtype, a shape whose size overflows or disagrees with the file's length, trailing bytes) is
 * TL_EUSAGE with one line naming the file and what is wrong; a file that cannot be opened, or is
 * not a regular file (a named pipe is refused at once, never waited on), is TL_EUSAGE too (the user
 * named it). The body is allocated only once the file is known to hold it. Cost: one pass over the
 * file; memory = its data.
 * Write: version 1.0, atomically (core/tl.h: never a half-written file). */
#ifndef TL_NPY_H
#define TL_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "tl.h"

#define TL_NPY_MAX_DIM 8
/* Largest body read: 64 GiB (anything larger is refused as absurd before allocating). */
#define TL_NPY_MAX_BYTES (64ull << 30)

typedef enum { TL_NPY_F32, TL_NPY_F16, TL_NPY_BF16, TL_NPY_I32, TL_NPY_U8, TL_NPY_NTYPES } tl_npy_type;

typedef struct {
    tl_npy_type type;
    int ndim;
    size_t shape[TL_NPY_MAX_DIM];
    size_t count; /* product of shape (1 for a scalar) */
    void *data;   /* count elements of type, owned; free with tl_npy_free */
} tl_npy;

/* "float32", "float16", "bfloat16 (uint16 bits)", "int32", "uint8". */
const char *tl_npy_type_name(tl_npy_type t);
size_t tl_npy_type_size(tl_npy_type t);

int tl_npy_read(const char *path, tl_npy *a);
void tl_npy_free(tl_npy *a);
/* "[3, 4]" into buf (for messages). */
void tl_npy_shape_str(const tl_npy *a, char *buf, size_t n);

/* Writes count = prod(shape) elements of type from data to path (atomically). TL_EUSAGE for a bad
 * path or shape, TL_EFAIL when writing fails. */
int tl_npy_write(const char *path, tl_npy_type type, int ndim, const size_t *shape, const void *data);

/* The elements of a floating-point array (f32, f16, bf16) as float32 into out (a->count floats);
 * TL_EUSAGE naming `what` for an integer array. */
int tl_npy_to_f32(const tl_npy *a, const char *what, float *out);

#endif
