/* executor/runtime.cpp: the CPU executor's runtime: launches, work-groups, waves in lockstep, LDS,
 * the emulated device's properties and memory (executor/hip_emu.h is its contract).
 *
 * A launch runs to completion inside tl_emu_launch. Work-groups are taken in order from a shared
 * counter by the threads of an OpenMP team; each OS thread keeps its work-groups resident until
 * they end (normally one at a time; it admits another only when every resident work-item polls
 * memory another work-group must write: topk's row barrier). A work-group's work-items are fibers
 * (Boost.Context's fcontext: a few ns a switch) run in order, each until it reaches a wave
 * operation, a barrier, a poll or its end; a wave operation runs once all live lanes of the wave
 * are at it (the same site: the same return address), a barrier once every work-item of the group
 * is at it. Everything a kernel does between those points is plain host code on host memory.
 *
 * Errors (a kernel's hazard or trap): the first is recorded with the kernel's name, the work-group
 * and the source lines (addr2line on the executable, when it is there), the launch stops, and
 * tl_emu_launch returns hipErrorLaunchFailure, whose hipGetErrorString is that message.
 * Cost: one fiber switch per work-item per wave operation and barrier; a 256 KiB stack (reserved,
 * touched as used) per resident work-item, pooled per OS thread.
 */
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <boost/context/detail/fcontext.hpp>

#include "amdgcn_ops.h"
#include "emu_abi.h"
#include "executor.h"

#if defined(__SANITIZE_ADDRESS__)
#define TL_EMU_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_EMU_ASAN 1
#endif
#endif
#if defined(TL_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace bctx = boost::context::detail;

namespace {

constexpr int WAVE = 64;
constexpr size_t STACK_BYTES = 256 * 1024;

enum State { READY, AT_WAVE, AT_BARRIER, SPINNING, DONE };

struct WorkGroup;
struct Launch;

struct Item {
    tl_emu_item pub;
    State state;
    bctx::fcontext_t ctx, sched;
    void *stack;
    WorkGroup *wg;
    /* the wave operation or barrier it waits at */
    const char *what;
    tl_emu_wave_fn op;
    const void *in;
    void *out;
    uint32_t imm;
    const void *site;
#if defined(TL_EMU_ASAN)
    void *fake;
#endif
};

struct LdsVar {
    const void *key;
    size_t offset;
};

struct WorkGroup {
    long id;
    std::vector<Item> items;
    std::vector<uint8_t> lds;
    size_t lds_used, dyn_bytes;
    std::vector<LdsVar> vars;
};

struct Launch {
    const void *kernel;
    dim3 grid, block;
    size_t smem;
    void (*body)(const void *);
    const void *ctx;
    long n_groups;
    unsigned threads;
    std::atomic<long> next{0};
    std::atomic<long> progress{0};
    std::atomic<int> failed{0};
    unsigned char packet[64];
};

/* the emulated device */
const tl_emu_target *g_target = nullptr;
std::mutex g_err_lock;
char g_err[2048];
int g_last_error = hipSuccess;
Launch *g_launch = nullptr;           /* the running launch (one at a time) */
struct {
    std::atomic<long long> launches{0}, groups{0}, items{0}, wave_ops{0}, mfmas{0}, barriers{0};
    std::atomic<long long> nanoseconds{0};
} g_stats;
thread_local Item *t_self = nullptr;  /* the running work-item of this OS thread */
thread_local std::vector<void *> t_stacks;
#if defined(TL_EMU_ASAN)
thread_local void *t_sched_fake = nullptr;
thread_local const void *t_sched_bottom = nullptr;
thread_local size_t t_sched_size = 0;
#endif

/* ---- reporting ---- */

/* addr2line -C -f -i's lines for a code address, cached: pairs (function, file:line), from the
 * innermost inlined frame outward, discriminators cut; empty when addr2line or the symbols are
 * missing. at_call: addr is a return address (the call is the byte before it). */
std::mutex g_lines_lock;
std::vector<std::pair<const void *, std::vector<std::string>>> g_lines_cache;

std::vector<std::string> source_lines(const void *addr, bool at_call)
{
    const void *key = (const char *)addr - (at_call ? 1 : 0);
    {
        std::lock_guard<std::mutex> g(g_lines_lock);
        for (const auto &e : g_lines_cache)
            if (e.first == key) return e.second;
    }
    std::vector<std::string> lines;
    Dl_info info;
    if (addr && dladdr(addr, &info) && info.dli_fname) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
                 (unsigned long)((uintptr_t)key - (uintptr_t)info.dli_fbase));
        if (FILE *p = popen(cmd, "r")) {
            char line[600];
            while (fgets(line, sizeof line, p)) {
                line[strcspn(line, "\n")] = '\0';
                char *d = strstr(line, " (discriminator");
                if (d) *d = '\0';
                lines.emplace_back(line);
            }
            pclose(p);
        }
    }
    std::lock_guard<std::mutex> g(g_lines_lock);
    g_lines_cache.emplace_back(key, lines);
    return lines;
}

/* file:line from kernels/ on (or the file's own name) */
std::string short_place(const std::string &where)
{
    const size_t k = where.find("kernels/");
    if (k != std::string::npos) return where.substr(k);
    const size_t slash = where.rfind('/');
    return slash == std::string::npos ? where : where.substr(slash + 1);
}

/* A kernel's name (want_function: addr is the function), or a site's source line: the innermost
 * and, when they differ, the outermost frame ("kernels/x.hip:12 (in kernels/gpu.h:40)"). Empty
 * when addr2line cannot say. */
void describe_address(const void *addr, int want_function, char *buf, size_t n)
{
    buf[0] = '\0';
    const std::vector<std::string> lines = source_lines(addr, !want_function);
    if (lines.size() < 2) return;
    if (want_function) {
        std::string fn = lines[0].substr(0, lines[0].find('('));
        snprintf(buf, n, "%s", fn[0] != '?' ? fn.c_str() : "");
        return;
    }
    const std::string inner = short_place(lines[1]), outer = short_place(lines[lines.size() - 1 - (lines.size() % 2)]);
    if (outer != inner) snprintf(buf, n, "%s (in %s)", outer.c_str(), inner.c_str());
    else snprintf(buf, n, "%s", inner[0] != '?' ? inner.c_str() : "");
}

void site_text(const void *site, char *buf, size_t n)
{
    describe_address(site, 0, buf, n);
    if (!buf[0]) snprintf(buf, n, "code address %p", site);
}

/* Records the launch's first failure: "kernel K, work-group (x,y,z): <why>". */
void fail_launch(Launch *L, const WorkGroup *wg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fail_launch(Launch *L, const WorkGroup *wg, const char *fmt, ...)
{
    int expected = 0;
    if (!L->failed.compare_exchange_strong(expected, 1)) return;
    char why[1400], name[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    describe_address(L->kernel, 1, name, sizeof name);
    std::lock_guard<std::mutex> g(g_err_lock);
    if (wg) {
        const long gx = L->grid.x, gy = L->grid.y;
        snprintf(g_err, sizeof g_err, "executor (%s): kernel %s, work-group (%ld,%ld,%ld): %s", g_target ? g_target->arch : "?",
                 name[0] ? name : "?", wg->id % gx, (wg->id / gx) % gy, wg->id / (gx * gy), why);
    } else {
        snprintf(g_err, sizeof g_err, "executor (%s): kernel %s: %s", g_target ? g_target->arch : "?", name[0] ? name : "?", why);
    }
}

/* ---- stacks and fibers ---- */

void *take_stack()
{
    if (!t_stacks.empty()) {
        void *s = t_stacks.back();
        t_stacks.pop_back();
        return s;
    }
    void *s = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (s == MAP_FAILED) return nullptr;
    mprotect(s, 4096, PROT_NONE); /* guard page: a kernel that overflows its stack faults */
    return s;
}

void give_stack(void *s)
{
    if (s) t_stacks.push_back(s);
}

void switch_to_scheduler(Item *it, bool final)
{
#if defined(TL_EMU_ASAN)
    __sanitizer_start_switch_fiber(final ? nullptr : &it->fake, t_sched_bottom, t_sched_size);
#endif
    bctx::transfer_t t = bctx::jump_fcontext(it->sched, it);
    it->sched = t.fctx;
#if defined(TL_EMU_ASAN)
    __sanitizer_finish_switch_fiber(it->fake, &t_sched_bottom, &t_sched_size);
#endif
}

void fiber_main(bctx::transfer_t t)
{
    Item *it = (Item *)t.data;
    it->sched = t.fctx;
#if defined(TL_EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &t_sched_bottom, &t_sched_size);
#endif
    g_launch->body(g_launch->ctx);
    it->state = DONE;
    switch_to_scheduler(it, true);
    __builtin_unreachable();
}

void resume(Item *it)
{
    t_self = it;
#if defined(TL_EMU_ASAN)
    __sanitizer_start_switch_fiber(&t_sched_fake, (const char *)it->stack, STACK_BYTES);
#endif
    bctx::transfer_t t = bctx::jump_fcontext(it->ctx, it);
    it->ctx = t.fctx;
#if defined(TL_EMU_ASAN)
    __sanitizer_finish_switch_fiber(t_sched_fake, nullptr, nullptr);
#endif
    t_self = nullptr;
}

/* ---- work-groups ---- */

bool start_group(Launch *L, long id, WorkGroup *wg)
{
    wg->id = id;
    wg->items.assign(L->threads, Item{});
    wg->dyn_bytes = L->smem;
    wg->lds.assign(g_target->lds_bytes, 0xFF);
    wg->lds_used = (L->smem + 15) & ~(size_t)15;
    wg->vars.clear();
    const unsigned bx = L->block.x, by = L->block.y;
    const dim3 b = {(unsigned)(id % L->grid.x), (unsigned)((id / L->grid.x) % L->grid.y),
                    (unsigned)(id / ((long)L->grid.x * L->grid.y))};
    for (unsigned f = 0; f < L->threads; f++) {
        Item &it = wg->items[f];
        it.pub.thread = {f % bx, (f / bx) % by, f / (bx * by)};
        it.pub.block = b;
        it.pub.block_dim = L->block;
        it.pub.grid_dim = L->grid;
        it.pub.flat = f;
        it.state = READY;
        it.wg = wg;
        it.stack = take_stack();
        if (!it.stack) {
            fail_launch(L, wg, "out of memory for the work-items' stacks");
            return false;
        }
        it.ctx = bctx::make_fcontext((char *)it.stack + STACK_BYTES, STACK_BYTES - 4096, fiber_main);
    }
    return true;
}

void end_group(WorkGroup *wg)
{
    for (Item &it : wg->items) give_stack(it.stack);
    wg->items.clear();
}

/* "0-31,40" style list of the work-items of [from, to) for which pred(item, arg) holds, counted from from */
void item_range_text(const WorkGroup *wg, unsigned from, unsigned to, bool (*pred)(const Item &, const void *), const void *arg,
                     char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (unsigned i = from; i < to && len < n;) {
        if (!pred(wg->items[i], arg)) {
            i++;
            continue;
        }
        unsigned j = i;
        while (j + 1 < to && pred(wg->items[j + 1], arg)) j++;
        if (j > i) len += (size_t)snprintf(buf + len, n - len, "%s%u-%u", len ? "," : "", i - from, j - from);
        else len += (size_t)snprintf(buf + len, n - len, "%s%u", len ? "," : "", i - from);
        i = j + 1;
    }
}

/* The host compiler may duplicate a block (jump threading, tail duplication), so one source site
 * can have several addresses: two addresses are the same site when their whole inline chains of
 * functions and lines agree. */
std::string site_chain(const void *addr)
{
    std::string chain;
    for (const std::string &l : source_lines(addr, true)) chain += l + "\n";
    if (chain.empty() || chain[0] == '?') chain = "address " + std::to_string((uintptr_t)addr);
    return chain;
}

bool same_site(const void *a, const void *b) { return a == b || site_chain(a) == site_chain(b); }

bool same_wait(const Item &a, const void *b)
{
    const Item &o = *(const Item *)b;
    return a.state == o.state && a.op == o.op && same_site(a.site, o.site);
}

/* Runs one wave's operation when all its live lanes wait at it. Returns 1 (ran), 0 (not ready),
 * -1 (error recorded). */
int resolve_wave(Launch *L, WorkGroup *wg, unsigned w0, unsigned w1)
{
    const Item *lead = nullptr;
    uint64_t live = 0;
    for (unsigned i = w0; i < w1; i++) {
        const Item &it = wg->items[i];
        if (it.state == DONE) continue;
        if (it.state == READY || it.state == SPINNING) return 0;
        live |= 1ull << (i - w0);
        if (!lead) lead = &it;
    }
    if (!lead || lead->state == AT_BARRIER) {
        /* all live lanes at a barrier (checked with the group), or none live */
        bool mixed = false;
        for (unsigned i = w0; i < w1; i++)
            if (wg->items[i].state == AT_WAVE) mixed = true;
        if (!mixed) return 0;
    }
    for (unsigned i = w0; i < w1; i++) {
        const Item &it = wg->items[i];
        if (it.state == DONE || same_wait(it, lead)) continue;
        char a[200], b[200], sa[700], sb[700];
        item_range_text(wg, w0, w1, same_wait, lead, a, sizeof a);
        item_range_text(wg, w0, w1, same_wait, &it, b, sizeof b);
        site_text(lead->site, sa, sizeof sa);
        site_text(it.site, sb, sizeof sb);
        fail_launch(L, wg, "wave %u diverges: lanes %s at %s (%s), lanes %s at %s (%s)", w0 / WAVE, a,
                    lead->state == AT_BARRIER ? "a barrier" : lead->what, sa, b,
                    it.state == AT_BARRIER ? "a barrier" : it.what, sb);
        return -1;
    }
    if (lead->state != AT_WAVE) return 0;
    const void *in[WAVE];
    void *out[WAVE];
    for (int l = 0; l < WAVE; l++) {
        const unsigned i = w0 + (unsigned)l;
        const bool on = i < w1 && wg->items[i].state == AT_WAVE;
        in[l] = on ? wg->items[i].in : nullptr;
        out[l] = on ? wg->items[i].out : nullptr;
    }
    char why[600] = "";
    if (lead->op(in, out, live, lead->imm, why, sizeof why)) {
        char s[700];
        site_text(lead->site, s, sizeof s);
        fail_launch(L, wg, "%s at %s: %s", lead->what, s, why);
        return -1;
    }
    for (unsigned i = w0; i < w1; i++)
        if (wg->items[i].state == AT_WAVE) wg->items[i].state = READY;
    g_stats.wave_ops.fetch_add(1, std::memory_order_relaxed);
    if (lead->op == tl_emu_op_mfma) g_stats.mfmas.fetch_add(1, std::memory_order_relaxed);
    return 1;
}

/* Releases the group's barrier once every work-item is at the same one. 1 released, 0 not yet,
 * -1 error recorded. */
int resolve_barrier(Launch *L, WorkGroup *wg)
{
    const Item *lead = nullptr;
    bool exited = false;
    for (const Item &it : wg->items) {
        if (it.state == DONE) {
            exited = true;
            continue;
        }
        if (it.state != AT_BARRIER) return 0;
        if (!lead) lead = &it;
    }
    if (!lead) return 0;
    char s[700], a[200], b[200];
    const unsigned n = (unsigned)wg->items.size();
    for (const Item &it : wg->items) {
        if (it.state == AT_BARRIER && !same_site(it.site, lead->site)) {
            char s2[700];
            item_range_text(wg, 0, n, same_wait, lead, a, sizeof a);
            item_range_text(wg, 0, n, same_wait, &it, b, sizeof b);
            site_text(lead->site, s, sizeof s);
            site_text(it.site, s2, sizeof s2);
            fail_launch(L, wg, "work-items %s wait at the barrier at %s, work-items %s at another barrier at %s", a, s, b, s2);
            return -1;
        }
    }
    if (exited) {
        auto done = [](const Item &it, const void *) { return it.state == DONE; };
        item_range_text(wg, 0, n, done, nullptr, b, sizeof b);
        item_range_text(wg, 0, n, same_wait, lead, a, sizeof a);
        site_text(lead->site, s, sizeof s);
        fail_launch(L, wg, "work-items %s have exited and never reach the barrier at %s that work-items %s wait at", b, s, a);
        return -1;
    }
    for (Item &it : wg->items) it.state = READY;
    g_stats.barriers.fetch_add(1, std::memory_order_relaxed);
    return 1;
}

/* One pass over a resident group: every runnable work-item runs to its next stop, then the waves'
 * operations and the barrier resolve. Returns 1 when something other than a poll moved, 0 when
 * every live work-item polls, 2 when the group has ended, -1 on error. */
int step_group(Launch *L, WorkGroup *wg)
{
    bool moved = false, all_done = true;
    for (Item &it : wg->items) {
        if (it.state != READY && it.state != SPINNING) continue;
        const bool was_ready = it.state == READY;
        it.state = READY;
        resume(&it);
        if (L->failed.load(std::memory_order_relaxed)) return -1;
        if (was_ready || it.state != SPINNING) moved = true;
    }
    const unsigned n = (unsigned)wg->items.size();
    for (unsigned w0 = 0; w0 < n; w0 += WAVE) {
        const int r = resolve_wave(L, wg, w0, w0 + WAVE < n ? w0 + WAVE : n);
        if (r < 0) return -1;
        if (r > 0) moved = true;
    }
    const int r = resolve_barrier(L, wg);
    if (r < 0) return -1;
    if (r > 0) moved = true;
    bool spinning = false;
    for (const Item &it : wg->items) {
        if (it.state != DONE) all_done = false;
        if (it.state == SPINNING || it.state == READY) spinning = true;
    }
    if (all_done) return 2;
    if (!moved && !spinning) {
        /* every live work-item waits and nothing can release it */
        const Item *w = nullptr;
        for (const Item &it : wg->items)
            if (it.state != DONE) {
                w = &it;
                break;
            }
        char s[700], a[200];
        site_text(w->site, s, sizeof s);
        item_range_text(wg, 0, n, same_wait, w, a, sizeof a);
        fail_launch(L, wg, "work-items %s wait forever at %s (%s)", a, w->state == AT_BARRIER ? "a barrier" : w->what, s);
        return -1;
    }
    return moved ? 1 : 0;
}

void run_thread(Launch *L)
{
    std::vector<WorkGroup *> resident;
    std::vector<WorkGroup *> spare;
    long seen_progress = -1;
    auto idle_since = std::chrono::steady_clock::now();
    while (!L->failed.load(std::memory_order_relaxed)) {
        bool moved = false;
        for (size_t r = 0; r < resident.size();) {
            const int s = step_group(L, resident[r]);
            if (s < 0) break;
            if (s == 2) {
                end_group(resident[r]);
                spare.push_back(resident[r]);
                resident.erase(resident.begin() + (long)r);
                L->progress.fetch_add(1, std::memory_order_relaxed);
                moved = true;
                continue;
            }
            if (s == 1) {
                moved = true;
                L->progress.fetch_add(1, std::memory_order_relaxed);
            }
            r++;
        }
        if (L->failed.load(std::memory_order_relaxed)) break;
        if (resident.empty() || !moved) {
            const long id = L->next.fetch_add(1);
            if (id < L->n_groups) {
                WorkGroup *wg = spare.empty() ? new WorkGroup() : spare.back();
                if (!spare.empty()) spare.pop_back();
                if (!start_group(L, id, wg)) {
                    delete wg;
                    break;
                }
                resident.push_back(wg);
                continue;
            }
            if (resident.empty()) break;
        }
        if (!moved) { /* only polls: another OS thread's work-group must move; give up after 20 s of nothing */
            const long p = L->progress.load(std::memory_order_relaxed);
            const auto now = std::chrono::steady_clock::now();
            if (p != seen_progress) {
                seen_progress = p;
                idle_since = now;
            } else if (now - idle_since > std::chrono::seconds(20)) {
                fail_launch(L, resident[0], "polls memory for 20 s while no work-group of the launch moves (a wait nothing can end)");
                break;
            }
        }
    }
    for (WorkGroup *wg : resident) {
        end_group(wg);
        delete wg;
    }
    for (WorkGroup *wg : spare) delete wg;
}

Item *self_or_die(const char *what)
{
    if (!t_self) {
        fprintf(stderr, "tilelab: error: executor: %s called outside a kernel\n", what);
        abort();
    }
    return t_self;
}

} // namespace

/* ================================ the kernels' side ================================= */

extern "C" {

const tl_emu_item *tl_emu_self(void) { return &self_or_die("threadIdx")->pub; }

void tl_emu_wave(const char *what, tl_emu_wave_fn op, const void *in, void *out, uint32_t imm, const void *site)
{
    Item *it = self_or_die(what);
    it->state = AT_WAVE;
    it->what = what;
    it->op = op;
    it->in = in;
    it->out = out;
    it->imm = imm;
    it->site = site;
    switch_to_scheduler(it, false);
}

void tl_emu_barrier(const void *site)
{
    Item *it = self_or_die("__syncthreads");
    it->state = AT_BARRIER;
    it->what = "barrier";
    it->op = nullptr;
    it->site = site;
    switch_to_scheduler(it, false);
}

void tl_emu_spin(void)
{
    Item *it = self_or_die("s_sleep");
    it->state = SPINNING;
    it->site = __builtin_return_address(0);
    switch_to_scheduler(it, false);
}

void *tl_emu_lds_static(const void *key, size_t size, size_t align)
{
    Item *it = self_or_die("TL_SHARED");
    WorkGroup *wg = it->wg;
    for (const LdsVar &v : wg->vars)
        if (v.key == key) return wg->lds.data() + v.offset;
    if (align < 16) align = 16;
    const size_t off = (wg->lds_used + align - 1) & ~(align - 1);
    if (off + size > wg->lds.size()) {
        fail_launch(g_launch, wg, "LDS overflow: %zu bytes of dynamic LDS and static variables need more than the %zu bytes of a %s work-group",
                    wg->dyn_bytes, wg->lds.size(), g_target->arch);
        it->state = DONE;
        switch_to_scheduler(it, true);
    }
    wg->lds_used = off + size;
    wg->vars.push_back({key, off});
    return wg->lds.data() + off;
}

void *tl_emu_lds_dynamic(size_t align)
{
    Item *it = self_or_die("TL_SHARED_DYNAMIC");
    return it->wg->lds.data();
}

const void *tl_emu_dispatch_packet(void) { return g_launch ? g_launch->packet : nullptr; }

void tl_emu_trap(const char *why)
{
    Item *it = self_or_die("trap");
    fail_launch(g_launch, it->wg, "%s", why);
    it->state = DONE;
    switch_to_scheduler(it, true);
    __builtin_unreachable();
}

int tl_emu_cu(void) { return omp_get_thread_num(); }

unsigned long long tl_emu_realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 100000000ull + (unsigned long long)ts.tv_nsec / 10ull;
}

unsigned long long tl_emu_cycles(void) { return tl_emu_realtime(); }

int tl_emu_launch(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(const void *), const void *ctx)
{
    if (!g_target) return g_last_error = hipErrorLaunchFailure;
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    const unsigned long long groups = (unsigned long long)grid.x * grid.y * grid.z;
    if (threads == 0 || threads > 1024 || groups == 0 || grid.y > 65535 || grid.z > 65535 || smem > g_target->lds_bytes) {
        std::lock_guard<std::mutex> g(g_err_lock);
        snprintf(g_err, sizeof g_err, "executor (%s): invalid launch: grid %ux%ux%u, block %ux%ux%u, %zu bytes of dynamic LDS (at most %zu)",
                 g_target->arch, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, g_target->lds_bytes);
        return g_last_error = hipErrorInvalidValue;
    }
    Launch L;
    L.kernel = kernel;
    L.grid = grid;
    L.block = block;
    L.smem = smem;
    L.body = body;
    L.ctx = ctx;
    L.n_groups = (long)groups;
    L.threads = (unsigned)threads;
    memset(L.packet, 0, sizeof L.packet);
    const uint16_t wsz[3] = {(uint16_t)block.x, (uint16_t)block.y, (uint16_t)block.z};
    const uint32_t gsz[3] = {grid.x * block.x, grid.y * block.y, grid.z * block.z};
    memcpy(L.packet + 4, wsz, sizeof wsz);
    memcpy(L.packet + 12, gsz, sizeof gsz);
    g_launch = &L;
    const auto t0 = std::chrono::steady_clock::now();
    int nt = omp_get_max_threads();
    if ((long)nt > L.n_groups) nt = (int)L.n_groups;
#pragma omp parallel num_threads(nt)
    run_thread(&L);
    g_launch = nullptr;
    g_stats.launches += 1;
    g_stats.groups += L.n_groups;
    g_stats.items += L.n_groups * (long long)L.threads;
    g_stats.nanoseconds += (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    return g_last_error = L.failed.load() ? hipErrorLaunchFailure : hipSuccess;
}

/* ================================ the host API ================================= */

int tl_emu_malloc(void **p, size_t n)
{
    *p = n ? malloc(n) : malloc(1);
    return *p ? hipSuccess : (g_last_error = hipErrorOutOfMemory);
}
int hipFree(void *p)
{
    free(p);
    return hipSuccess;
}
int tl_emu_host_malloc(void **p, size_t n) { return tl_emu_malloc(p, n); }
int hipHostFree(void *p) { return hipFree(p); }
int tl_emu_memcpy(void *dst, const void *src, size_t n)
{
    if (n) memmove(dst, src, n);
    return hipSuccess;
}
int tl_emu_memset(void *p, int v, size_t n)
{
    if (n) memset(p, v, n);
    return hipSuccess;
}
int hipMemGetInfo(size_t *free_b, size_t *total_b)
{
    *free_b = *total_b = g_target ? g_target->mem_bytes : 0;
    return hipSuccess;
}
int hipGetLastError(void)
{
    const int e = g_last_error;
    g_last_error = hipSuccess;
    return e;
}
int hipPeekAtLastError(void) { return g_last_error; }
const char *hipGetErrorString(int e)
{
    switch (e) {
    case hipSuccess: return "no error";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNotSupported: return "not supported on the CPU executor (it has no timing)";
    case hipErrorInvalidValue:
    case hipErrorLaunchFailure: return g_err[0] ? g_err : "launch failure";
    default: return "executor error";
    }
}
const char *hipGetErrorName(int e) { return e == hipSuccess ? "hipSuccess" : "hipErrorLaunchFailure"; }
int hipGetDeviceCount(int *n)
{
    *n = g_target ? 1 : 0;
    return hipSuccess;
}
int hipGetDevice(int *d)
{
    *d = 0;
    return hipSuccess;
}
int hipSetDevice(int d) { return d == 0 ? hipSuccess : hipErrorInvalidValue; }

int hipGetDeviceProperties(hipDeviceProp_t *p, int d)
{
    if (!g_target || d != 0) return hipErrorInvalidValue;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "tilelab CPU executor (%s)", g_target->arch);
    snprintf(p->gcnArchName, sizeof p->gcnArchName, "%s:sramecc+:xnack-", g_target->arch);
    p->totalGlobalMem = g_target->mem_bytes;
    p->sharedMemPerBlock = p->maxSharedMemoryPerMultiProcessor = g_target->lds_bytes;
    p->regsPerBlock = 512 * 64;
    p->warpSize = WAVE;
    p->maxThreadsPerBlock = 1024;
    p->clockRate = g_target->clock_khz;
    p->memoryClockRate = 0;
    p->memoryBusWidth = 0;
    p->multiProcessorCount = g_target->compute_units;
    p->l2CacheSize = 4 << 20;
    p->major = 9;
    p->minor = 4;
    p->maxThreadsPerMultiProcessor = 2048;
    return hipSuccess;
}
int hipDeviceGetAttribute(int *v, hipDeviceAttribute_t a, int d)
{
    if (!g_target || d != 0) return hipErrorInvalidValue;
    switch (a) {
    case hipDeviceAttributeClockRate: *v = g_target->clock_khz; break;
    case hipDeviceAttributeMemoryClockRate: *v = 0; break;
    case hipDeviceAttributeMemoryBusWidth: *v = 0; break;
    case hipDeviceAttributeMultiprocessorCount: *v = g_target->compute_units; break;
    case hipDeviceAttributeL2CacheSize: *v = 4 << 20; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *v = (int)g_target->lds_bytes; break;
    case hipDeviceAttributeWallClockRate: *v = 100000; break; /* kHz */
    case hipDeviceAttributeWarpSize: *v = WAVE; break;
    default: return hipErrorInvalidValue;
    }
    return hipSuccess;
}
int hipDeviceSynchronize(void) { return hipSuccess; }
int hipStreamCreate(void **s)
{
    static int dummy;
    *s = &dummy;
    return hipSuccess;
}
int hipStreamDestroy(void *) { return hipSuccess; }
int hipStreamSynchronize(void *) { return hipSuccess; }
int hipStreamBeginCapture(void *, int) { return g_last_error = hipErrorNotSupported; }
int hipStreamEndCapture(void *, void **) { return g_last_error = hipErrorNotSupported; }
int hipGraphInstantiateWithFlags(void **, void *, unsigned long long) { return g_last_error = hipErrorNotSupported; }
int hipGraphLaunch(void *, void *) { return g_last_error = hipErrorNotSupported; }
int hipGraphDestroy(void *) { return hipSuccess; }
int hipGraphExecDestroy(void *) { return hipSuccess; }
int hipEventCreate(void **e)
{
    *e = malloc(sizeof(double));
    return *e ? hipSuccess : hipErrorOutOfMemory;
}
int hipEventDestroy(void *e)
{
    free(e);
    return hipSuccess;
}
int hipEventRecord(void *e, void *)
{
    *(double *)e = (double)tl_emu_realtime() * 1e-5; /* ms */
    return hipSuccess;
}
int hipEventSynchronize(void *) { return hipSuccess; }
int hipEventElapsedTime(float *ms, void *a, void *b)
{
    *ms = (float)(*(double *)b - *(double *)a);
    return hipSuccess;
}
int tl_emu_func_set_attribute(const void *, int, int) { return hipSuccess; }
int tl_emu_occupancy(int *blocks, const void *, int threads, size_t smem)
{
    if (!g_target || threads < 1) return hipErrorInvalidValue;
    int by_threads = 2048 / threads, by_lds = smem ? (int)(g_target->lds_bytes / smem) : by_threads;
    *blocks = by_threads < by_lds ? by_threads : by_lds;
    return hipSuccess;
}

/* ================================ the executor's own API ================================= */

static const tl_emu_target targets[] = {
    /* arch, CUs, LDS per work-group, engine clock kHz, memory (FACTS.md) */
    {"gfx942", 304, 64 * 1024, 2100000, (size_t)192 << 30},
    {"gfx950", 256, 160 * 1024, 2400000, (size_t)288 << 30},
};

const tl_emu_target *tl_emu_find_target(const char *arch)
{
    for (const tl_emu_target &t : targets)
        if (strcmp(t.arch, arch) == 0) return &t;
    return nullptr;
}

void tl_emu_set_target(const tl_emu_target *t) { g_target = t; }

void tl_emu_stats_get(tl_emu_stats *out)
{
    out->launches = g_stats.launches, out->groups = g_stats.groups, out->items = g_stats.items;
    out->wave_ops = g_stats.wave_ops, out->mfmas = g_stats.mfmas, out->barriers = g_stats.barriers;
    out->seconds = (double)g_stats.nanoseconds * 1e-9;
}

void tl_emu_stats_reset(void)
{
    g_stats.launches = g_stats.groups = g_stats.items = g_stats.wave_ops = g_stats.mfmas = g_stats.barriers = 0;
    g_stats.nanoseconds = 0;
}
const tl_emu_target *tl_emu_target_now(void) { return g_target; }

} // extern "C"
