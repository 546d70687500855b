/* Kernels as points on a roofline: read from tilelab's own CSV, an Nsight Compute `ncu --csv`
 * export, or a rocprofv3 counter-collection CSV. The format is detected from the header row.
 *
 * 1. tilelab CSV (`tilelab sim ... --format csv`, `tilelab bench ... --format csv`, or by hand):
 *    a header with either flops (or flops_useful), hbm_bytes (or bytes) and time_us, or intensity
 *    (FLOP/byte) and tflops; a label from the first of the columns name, kernel, label, op, or
 *    tokens (written "M=<tokens>"; with a stage column "M=<tokens> s<stage>"). A kernel or op
 *    column (without name or label) gets the row's stage and tokens added: "moe_gemm s1 M=64", so
 *    that one kernel's launches at several M tell apart. Provenance: a
 *    `source` column (per row, e.g. "measured on NVIDIA H200, 2026-11-29" or "simulated on preset
 *    mi355x") or a comment line starting with '#' that holds "measured" or "simulated"; rows with a
 *    limiter column and no other hint are simulated (on the preset of the hw column, if any).
 * 2. Nsight Compute: `ncu --csv --metrics ...` (long form: "ID","Kernel Name",...,"Metric Name",
 *    "Metric Unit","Metric Value"; any lines before the header, such as ==PROF== lines, are
 *    skipped; values may carry thousands separators), or the wide form of `--page raw` (metrics as
 *    columns, a units row under the header). Per launch (ID):
 *      FLOPs  = sum of sm__ops_path_tensor_src_{bf16_dst_fp32,fp16,fp16_dst_fp16,fp16_dst_fp32,
 *               tf32_dst_fp32,fp8,fp64,int8}.sum (tensor-path math ops, which count FLOPs: checked
 *               on an H200, where mma.sync m16n8k16 BF16 adds exactly 2*16*8*16 per warp
 *               instruction) + the CUDA-core ops sm__sass_thread_inst_executed_op_{f,h,d}add,
 *               _mul (1 FLOP) and _fma (2 FLOPs) _pred_on.sum (smsp__ forms too);
 *      bytes  = dram__bytes_read.sum + dram__bytes_write.sum (or dram__bytes.sum);
 *      time   = gpu__time_duration.sum (units ns, us, ms, s, nsecond, usecond, msecond, second).
 *    Byte units byte/Kbyte/Mbyte/Gbyte/Tbyte are decimal (ncu's SI prefixes); KiB/MiB/GiB binary.
 *    Launches of the same kernel name are summed into one point. Measured.
 * 3. rocprofv3 counter collection (`rocprofv3 --pmc ... --output-format csv`, the
 *    *_counter_collection.csv file: "Correlation_Id","Dispatch_Id",...,"Kernel_Name",...,
 *    "Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"). Per dispatch:
 *      FLOPs  = 512 * SQ_INSTS_VALU_MFMA_MOPS_* (every data type; one MOP = 512 FLOPs) +
 *               64 * SQ_INSTS_VALU_{ADD,MUL}_F{16,32,64} + 128 * SQ_INSTS_VALU_FMA_F{16,32,64};
 *      bytes  = 1024 * (FETCH_SIZE + WRITE_SIZE) (both in KiB), or else from the TCC_EA0 requests:
 *               32 * RDREQ_32B + 64 * (RDREQ - RDREQ_32B) + 64 * WRREQ_64B + 32 * (WRREQ -
 *               WRREQ_64B) (a "_sum" suffix on a counter name is accepted);
 *      time   = End_Timestamp - Start_Timestamp (ns).
 *    Dispatches of the same kernel name are summed into one point. Measured.
 *
 * A row or kernel with zero FLOPs or zero bytes (e.g. `bench roofline --points`'s matrix loops and
 * HBM kernels) has no place on a log-log roofline: it is left out, and `source` says how many were.
 * Errors (TL_EUSAGE, one line naming the file and line): unreadable or not a regular file, unknown
 * header, a malformed number, a negative or non-finite value, zero time, a kernel without a FLOP,
 * byte or time counter, no placeable row, more than 4096 points or 20000 profiled launches.
 */
#ifndef TL_POINTS_H
#define TL_POINTS_H

#include "../core/tl.h"

typedef enum { TL_POINTS_TILELAB, TL_POINTS_NCU, TL_POINTS_ROCPROF } tl_points_format;

typedef struct {
    char label[96];
    double flops;      /* FLOPs of all launches (0 when the file gave intensity and tflops) */
    double bytes;      /* DRAM / HBM bytes */
    double time_us;    /* summed duration */
    double intensity;  /* FLOP per byte */
    double tflops;     /* achieved TFLOP/s */
    int launches;
    int measured;      /* 1 measured, 0 simulated, -1 unknown */
} tl_point;

typedef struct {
    tl_points_format format;
    tl_point *pts;
    int n;
    char source[256];  /* provenance for the footer ("measured with Nsight Compute ..." etc.) */
    char name[64];     /* the file's base name (the `name` given to tl_points_parse), for legends */
} tl_points;

/* Reads a points file (any of the three formats). A profiler export's source ends in ", file of
 * DAY, device not named in it" (DAY: the file's modification day, UTC): the exports carry neither.
 * On success *out owns pts; free with tl_points_free. On error *out is zeroed. Cost: linear in the file size (read whole, 64 MiB max). */
int tl_points_read(const char *path, tl_points *out);
/* The same on text already in memory; `name` is used in messages. */
int tl_points_parse(const char *text, const char *name, tl_points *out);
void tl_points_free(tl_points *p);
const char *tl_points_format_name(tl_points_format f);

#endif
