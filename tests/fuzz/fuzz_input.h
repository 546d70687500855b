/* What every fuzz target of tests/fuzz shares: the input as a file, and the error contract.
 *
 * The readers under test take a path (they check that it is a regular file, read it, and name it
 * in their messages), so each input is written to one scratch file of this process and that path
 * is handed over, as a user's file would be. */
#ifndef TL_FUZZ_INPUT_H
#define TL_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

/* Replaces the scratch file's content with the size bytes of data and returns its path, which ends
 * in suffix (".json", ".csv", ".npy": only the first call's suffix counts) and holds no comma (so it
 * can be an item of a "base,overlay" spec). The file lives in $TMPDIR (or /tmp) and is removed at
 * exit (not after a crash: libFuzzer keeps the input itself). Aborts when the file cannot be
 * written, which is this machine's fault and not the input's. Cost: one ftruncate and one write. */
const char *tl_fuzz_file(const uint8_t *data, size_t size, const char *suffix);

/* The library's error contract (core/tl.h) for a call that returned rc: rc is TL_OK, TL_EFAIL or
 * TL_EUSAGE, and a non-zero rc recorded one message. Aborts with the message on a breach, which
 * libFuzzer reports as a crash with the input that caused it. Call tl_clear_error() before the
 * call under test. */
void tl_fuzz_check(int rc, const char *call);

/* Aborts with "call: what" when cond is false (a promise of the reader's header broken). */
void tl_fuzz_require(int cond, const char *call, const char *what);

#endif
