/* The running agent: policy passes every interval plus /metrics (TLS and basic auth from the
 * web config), keeping the timer's state file. Everything runs on libvirt's event loop, by the
 * main thread (docs/design.md): the jobs on the engine (the pass, polling the changes in flight,
 * the host and guest watches, refreshing the view after events, the probe, the state save) are
 * the loop's (loop.c, on one timer armed for the next job of its schedule, schedule.c); the
 * connection and its back-off, the spool, the watchdog and the signals (a signalfd) are timers
 * and a handle of their own. libmicrohttpd's threads serve the last rendering. Its options come
 * from the verb (cmd-agent.c). */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

#include "cli.h"
#include "session.h"
#include "conn.h"
#include "engine.h"
#include "ledger.h"
#include "loop.h"
#include "error.h"
#include "http.h"
#include "log.h"
#include "policy.h"
#include "spool.h"
#include "notify.h"
#include "size.h"
#include "state.h"
#include "webconfig.h"

#define RECONNECT_MAX_S 30
/* how often the spool of changes `set --wait` measured is read */
#define SPOOL_MS 1000

typedef struct {
    const BmAgentOptions *o;
    const char *state_path;      /* NULL: --dry-run or monitoring only, never written */
    BmPolicy *policy;
    virConnectPtr conn;
    int cb_lifecycle, cb_balloon, cb_vmem;
    unsigned backoff_s;
    bool conn_lost;
    BmEngine *e;
    BmLoop loop;                 /* the jobs on the engine and their schedule */
    BmHttp *http;
    bool web_tls, web_auth;      /* what the server runs with: HTTPS, basic auth */
    char *uri;                   /* what the connection is to (bm_conn_uri()), NULL before */
    char *spool_reported;        /* the spool problem reported last */
    BmStateWriter state_writer;
    int state_lock_fd;           /* the state file's lock, held while the agent runs; -1 */
    bool stop;
    bool ready_sent;             /* READY=1 went to the service manager */
    bool policy_stale;           /* the last reload failed: the last good policy runs */
    /* on the event loop: the loop's one timer, the agent's own jobs */
    int t_loop, t_spool, t_connect, t_watchdog, h_signal;
    int signal_fd;
} Agent;

/* Loads the web config, printing its errors. */
static int load_web_config(const char *path, BmWebConfig **ret)
{
    bm_error_reset();
    _cleanup_free_ char *errors = NULL;
    int r = bm_webconfig_load(path, ret, &errors);
    if (r < 0)
        bm_log_text(LOG_ERR, errors);
    return r;
}

/* "https, basic auth (2 users)" */
static const char *describe_web(const BmWebConfig *wc, char *buf, size_t n)
{
    size_t users = wc ? wc->n_users : 0;
    snprintf(buf, n, "%s, %s", wc && wc->tls ? "https" : "http", users ? "basic auth" : "no auth");
    if (users)
        snprintf(buf + strlen(buf), n - strlen(buf), " (%zu user%s)", users, users == 1 ? "" : "s");
    return buf;
}

/* SIGHUP: the new web config, or the last good one kept (reported). */
static void reload_web_config(Agent *a, const char *path)
{
    BmWebConfig *wc = NULL;
    char what[96];
    if (load_web_config(path, &wc) < 0) {
        bm_engine_count_error(a->e, BM_ERR_WEB_CONFIG);
        bm_report("agent", NULL, "web config %s not reloaded: keeping the last good one", path);
        return;
    }
    bool restarted = false;
    bm_error_reset();
    int r = bm_http_reconfigure(a->http, wc, &restarted);
    if (r < 0) {
        bm_engine_count_error(a->e, BM_ERR_WEB_CONFIG);
        bm_report("agent", NULL, "web config %s not applied: %s; keeping the last good one", path,
                  bm_error_detail(r));
    } else {
        /* well-formed, so applied; but what drops TLS or basic auth is said at warning */
        bool tls = wc && wc->tls, auth = wc && wc->n_users > 0;
        char less[96] = "";
        if (a->web_tls && !tls)
            snprintf(less, sizeof(less), "https -> http");
        if (a->web_auth && !auth)
            snprintf(less + strlen(less), sizeof(less) - strlen(less), "%sbasic auth -> no auth",
                     less[0] ? ", " : "");
        bm_reportp(less[0] ? LOG_WARNING : LOG_NOTICE, "agent", NULL,
                   "%sweb config %s reloaded: %s%s%s%s", less[0] ? "warning: " : "", path,
                   describe_web(wc, what, sizeof(what)),
                   restarted ? "; TLS settings changed: the server was restarted on the same socket"
                             : "",
                   less[0] ? "; security change: " : "", less);
        a->web_tls = tls;
        a->web_auth = auth;
    }
    bm_webconfig_free(wc);
}

static void publish(Agent *a)
{
    bm_http_give_metrics(a->http, bm_engine_render(a->e, a->conn != NULL));
    malloc_trim(0); /* the registry's many small blocks are free again: give their pages back */
}

/* A long-running process: two malloc arenas at most (the main thread's, and one the server's
 * threads share) rather than one per thread, each holding on to freed memory; and large blocks
 * (the exposition, snapshots) always mapped and unmapped on their own rather than left in the
 * heap (glibc raises the threshold dynamically otherwise). */
static void tune_malloc(void)
{
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

/* Arms timer to fire once after ms (0: at the next turn of the loop). */
static void arm(int timer, uint64_t ms)
{
    virEventUpdateTimeout(timer, (int)(ms > 3600000 ? 3600000 : ms));
}

static void disarm(int timer)
{
    virEventUpdateTimeout(timer, -1);
}

static uint64_t now_ms(void)
{
    return bm_now_mono_ns() / 1000000ull;
}

/* The loop's timer armed for the next job of its schedule. */
static void arm_loop(Agent *a)
{
    uint64_t next = bm_schedule_next_ms(&a->loop.sched), now = now_ms();
    if (next == BM_SCHEDULE_OFF)
        disarm(a->t_loop);
    else
        arm(a->t_loop, next > now ? next - now : 0);
}

/* An event for the loop's schedule (a reading soon, a pass at once, ...). */
static void loop_event(Agent *a, BmEvent ev)
{
    bm_loop_event(&a->loop, ev, now_ms());
    arm_loop(a);
}

/* ---- libvirt events (on the loop's thread) ---- */

static int on_lifecycle(virConnectPtr c, virDomainPtr d, int event, int detail, void *opaque)
{
    (void)c, (void)d, (void)event, (void)detail;
    Agent *a = opaque;
    bm_engine_forget_xml(a->e); /* started, defined, ...: its definition may have changed */
    loop_event(a, BM_EVENT_DOMAIN);
    return 0;
}

static void on_balloon(virConnectPtr c, virDomainPtr d, unsigned long long actual, void *opaque)
{
    (void)c, (void)d, (void)actual;
    loop_event(opaque, BM_EVENT_DOMAIN);
}

/* a virtio-mem device changed size: a change of ours on it is read at the next poll (the
 * tracker reads one every second otherwise), and the domains within a second */
static void on_vmem_size(virConnectPtr c, virDomainPtr d, const char *alias,
                         unsigned long long size_kib, void *opaque)
{
    (void)c, (void)alias, (void)size_kib;
    Agent *a = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(d, uuid) == 0)
        bm_engine_vmem_changed(a->e, uuid);
    loop_event(a, BM_EVENT_DOMAIN);
}

static void on_close(virConnectPtr c, int reason, void *opaque)
{
    (void)c, (void)reason;
    Agent *a = opaque;
    a->conn_lost = true;
    arm(a->t_connect, 0);
}

/* ---- the connection ---- */

static void disconnect(Agent *a)
{
    if (!a->conn)
        return;
    bm_engine_set_conn(a->e, NULL); /* drops the changes in flight and their domains */
    if (a->cb_lifecycle >= 0)
        virConnectDomainEventDeregisterAny(a->conn, a->cb_lifecycle);
    if (a->cb_balloon >= 0)
        virConnectDomainEventDeregisterAny(a->conn, a->cb_balloon);
    if (a->cb_vmem >= 0)
        virConnectDomainEventDeregisterAny(a->conn, a->cb_vmem);
    virConnectUnregisterCloseCallback(a->conn, on_close);
    virConnectClose(a->conn);
    a->conn = NULL;
    a->cb_lifecycle = a->cb_balloon = a->cb_vmem = -1;
    loop_event(a, BM_EVENT_DISCONNECTED);
}

static bool try_connect(Agent *a)
{
    virConnectPtr c = NULL;
    int r = bm_conn_open(a->o->uri, a->o->monitor_only, &c);
    if (r < 0) {
        bm_report("agent", NULL, "%s; retrying in %u s", bm_error_detail(r), a->backoff_s);
        bm_engine_count_error(a->e, BM_ERR_LIBVIRT);
        arm(a->t_connect, (uint64_t)a->backoff_s * 1000);
        a->backoff_s = a->backoff_s * 2 > RECONNECT_MAX_S ? RECONNECT_MAX_S : a->backoff_s * 2;
        return false;
    }
    a->conn = c;
    free(a->uri);
    a->uri = bm_conn_uri(c);
    a->conn_lost = false;
    bm_engine_set_conn(a->e, c);
    virConnectRegisterCloseCallback(c, on_close, a, NULL);
    virConnectSetKeepAlive(c, 5, 3);
    a->cb_lifecycle = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                       VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), a, NULL);
    a->cb_balloon = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE,
                                                     VIR_DOMAIN_EVENT_CALLBACK(on_balloon), a, NULL);
    a->cb_vmem =
        virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE,
                                         VIR_DOMAIN_EVENT_CALLBACK(on_vmem_size), a, NULL);
    virResetLastError();
    a->backoff_s = 1;
    bm_reportp(LOG_INFO, "agent", NULL, "connected to %s",
               a->uri ? a->uri : a->o->uri ? a->o->uri : "libvirt");
    return true;
}

/* Tells the service manager (Type=notify, $NOTIFY_SOCKET) how the agent is: READY=1 with the
 * first pass (or the first failed connection: the agent serves /metrics without libvirt too),
 * and a STATUS= line of the last pass. A failure is reported once. */
static void notify_status(Agent *a, const char *status)
{
    char text[320];
    snprintf(text, sizeof(text), "%sSTATUS=%s", a->ready_sent ? "" : "READY=1\n", status);
    bm_error_reset();
    int r = bm_notify(text);
    static bool reported;
    if (r < 0 && !reported) {
        bm_report("agent", NULL, "warning: %s", bm_error_detail(r));
        reported = true;
    }
    a->ready_sent |= r > 0;
}

/* STATUS= after a pass: "mode reclaim, reclaimed 6.5 GiB, 12 domains (9 running)". */
static void notify_pass(Agent *a)
{
    const BmPlan *plan = bm_engine_plan(a->e);
    const BmSnapshot *snap = bm_engine_snapshot(a->e);
    uint64_t reclaimed = 0;
    size_t running = 0;
    for (size_t i = 0; snap && i < snap->n_domains; i++) {
        const BmDomain *d = &snap->domains[i];
        uint64_t r = bm_domain_reclaimed_bytes(d);
        running += d->active;
        if (d->active && bm_present(r))
            reclaimed += r;
    }
    char size[32], status[256];
    snprintf(status, sizeof(status), "mode %s, reclaimed %s, %zu domains (%zu running)%s%s",
             plan ? bm_host_mode_name(plan->mode) : "unknown",
             bm_size_format(reclaimed, size, sizeof(size)), snap ? snap->n_domains : 0, running,
             a->o->monitor_only ? ", monitoring only" : "",
             a->policy_stale ? "; policy not reloaded (see the log): the last good one runs" : "");
    notify_status(a, status);
}

/* Job: WATCHDOG=1 to the service manager, at half the interval it asked for. */
static void job_watchdog(int timer, void *opaque)
{
    bm_error_reset();
    (void)timer, (void)opaque;
    bm_notify("WATCHDOG=1");
}

/* Job: connect (at start, after a loss, with a growing back-off after failures). */
static void job_connect(int timer, void *opaque)
{
    bm_error_reset();
    Agent *a = opaque;
    disarm(timer);
    if (a->conn && a->conn_lost) {
        bm_reportp(LOG_WARNING, "agent", NULL, "lost the libvirt connection; reconnecting");
        bm_engine_count_error(a->e, BM_ERR_LIBVIRT);
        disconnect(a);
        arm(timer, 1000);
        publish(a);
        return;
    }
    if (a->conn)
        return;
    if (try_connect(a)) {
        bm_engine_forget_xml(a->e); /* definitions may have changed while away */
        loop_event(a, BM_EVENT_CONNECTED);
    } else {
        notify_status(a, "waiting for libvirt");
    }
    publish(a);
}

/* ---- the policy ---- */

/* Saves the state file (not in --dry-run); a failure is counted, and reported once (again
 * only when its reason changes: a failure with no detail stored is not reported again). */
static void save_state(Agent *a)
{
    if (!a->state_path)
        return;
    uint64_t now_s = bm_engine_pass_time_s(a->e);
    if (!now_s)
        now_s = bm_now_real_ns() / 1000000000ull;
    int r = bm_session_state_save("agent", &a->state_writer, a->state_path,
                                  bm_engine_ledger(a->e), now_s);
    if (r < 0 && bm_error_code() == r)
        bm_report("agent", NULL, "%s", bm_error_detail(r));
}

/* ---- the loop's jobs: what the agent does around them ---- */

/* After a pass: its problems reported, STATUS= to the service manager. */
static void on_passed(void *ctx, int r)
{
    Agent *a = ctx;
    if (r < 0)
        bm_report("agent", NULL, "pass: %s", bm_error_detail(r));
    else
        bm_session_report_applied("agent", a->e);
    notify_pass(a);
}

/* The save job: the state file, then the metrics (a failed save shows in errors_total at once). */
static void on_save(void *ctx)
{
    Agent *a = ctx;
    save_state(a);
    publish(a);
}

static void on_publish(void *ctx)
{
    publish(ctx);
}

static void on_lost(void *ctx)
{
    Agent *a = ctx;
    on_close(a->conn, 0, a);
}

/* The loop's timer: every job due now, then armed for the next one. */
static void job_loop(int timer, void *opaque)
{
    (void)timer;
    Agent *a = opaque;
    bm_loop_turn(&a->loop, now_ms());
    arm_loop(a);
}

/* Counts the changes 'set --wait' spooled for this connection; a problem with the spool is
 * reported when it is new (not every pass). Returns how many were counted. */
static int ingest_spool(Agent *a)
{
    if (!a->uri)
        return 0; /* never connected: whose changes would these be */
    return bm_session_spool_ingest("agent", bm_engine_ledger(a->e), a->uri, &a->spool_reported);
}

/* Job: count the changes `set --wait` measured. */
static void job_spool(int timer, void *opaque)
{
    bm_error_reset();
    (void)timer;
    Agent *a = opaque;
    if (ingest_spool(a) > 0) {
        loop_event(a, BM_EVENT_COUNTED);
        publish(a);
    }
}

/* SIGHUP: the policy and the web config again, or the last good ones kept (reported). */
static void reload(Agent *a)
{
    BmPolicy *fresh = NULL;
    if (bm_session_policy_load("agent", a->o->policy_path, a->o->policy_explicit, &fresh) == 0) {
        bm_policy_free(a->policy);
        a->policy = fresh;
        bm_engine_set_policy(a->e, fresh);
        bm_schedule_set_interval(&a->loop.sched, fresh->interval_s);
        bm_reportp(LOG_NOTICE, "agent", NULL, "policy %s reloaded", fresh->path);
        a->policy_stale = false;
    } else {
        a->policy_stale = true;
        bm_engine_count_error(a->e, BM_ERR_POLICY);
        bm_report("agent", NULL, "policy %s not reloaded: keeping the last good one",
                  a->o->policy_path);
    }
    if (a->o->web_config)
        reload_web_config(a, a->o->web_config);
    publish(a);
    if (a->ready_sent) /* `systemctl status` shows a failed reload at once, not a pass later */
        notify_pass(a);
}

/* Handle: the signals, read from the signalfd. */
static void on_signalfd(int watch, int fd, int events, void *opaque)
{
    bm_error_reset();
    (void)watch, (void)events;
    Agent *a = opaque;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP)
            reload(a);
        else
            a->stop = true;
    }
}

/* The signals go to a signalfd: blocked in every thread (before any is started). */
static int block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* The policy, the web config and the /metrics server. Returns 0 to go on, or -errno with the
 * detail the agent reports (-EINVAL: bad usage). */
static int start_serving(Agent *a)
{
    const BmAgentOptions *o = a->o;
    if (bm_session_policy_load("agent", o->policy_path, o->policy_explicit, &a->policy) < 0)
        return bm_error(-EINVAL, "policy '%s' has errors", o->policy_path);
    _cleanup_(bm_webconfig_freep) BmWebConfig *wc = NULL;
    if (o->web_config && load_web_config(o->web_config, &wc) < 0)
        return bm_error(-EINVAL, "web config '%s' has errors", o->web_config);
    /* a dry run reads the state but never writes it; monitoring only neither reads the
     * policy agent's state (its counters are not this agent's) unless told to, nor writes */
    bool writes = !o->dry_run && !o->monitor_only, reads = !o->monitor_only || o->state_explicit;
    int r;
    if ((reads && (r = bm_session_state_check(o->state_path, writes)) < 0) ||
        (r = bm_session_proc_check(o->proc_dir)) < 0)
        return r;
    a->state_path = writes ? o->state_path : NULL;
    /* a bad --listen is bad usage whatever the lock would say */
    BmListenAddrs addrs_checked;
    bm_error_reset();
    r = bm_http_resolve_listen(o->listen, &addrs_checked);
    if (r < 0)
        return bm_error(-EINVAL, "--listen '%s': %s", o->listen, bm_error_detail(r));
    /* one writer of the state file at a time, for the agent's life (before serving: a second
     * agent on the same state never starts) */
    if (writes && (r = bm_session_state_lock(o->state_path, &a->state_lock_fd)) < 0)
        return r;
    a->signal_fd = block_signals();
    bm_error_reset();
    r = bm_http_start(o->listen, wc, &a->http);
    if (r < 0)
        return r;
    a->web_tls = wc && wc->tls;
    a->web_auth = wc && wc->n_users > 0;
    char web[96], addrs[BM_HTTP_LISTEN_MAX * 56];
    bm_http_addresses(a->http, addrs, sizeof(addrs));
    /* "on LISTEN" only where it is not the address itself (a name, :PORT, port 0) */
    bool same = strcmp(o->listen, addrs) == 0;
    bm_reportp(LOG_INFO, "agent", NULL, "serving /metrics%s%s (%s) at %s, policy %s, every %u s, state %s%s",
            same ? "" : " on ", same ? "" : o->listen, describe_web(wc, web, sizeof(web)),
            addrs, a->policy->path, a->policy->interval_s,
            a->state_path ? a->state_path : "not written",
            o->monitor_only ? ", monitoring only (read-only connection, no changes)"
            : o->dry_run    ? ", dry run (no changes)" : "");
    return 0;
}

/* The engine, with the state file's ledger. */
static void start_engine(Agent *a)
{
    const BmAgentOptions *o = a->o;
    /* monitoring only (-r): read-only libvirt socket, no monitor, no spool, nothing written */
    bm_error_reset();
    int r = o->monitor_only ? 0 : bm_spool_create();
    if (r < 0)
        bm_report("agent", NULL, "warning: %s: changes made by 'set --wait' will not be counted",
                  bm_error_detail(r));
    BmEngineOptions eo = bm_loop_engine_options(o->dry_run, o->monitor_only);
    eo.proc_dir = o->proc_dir;
    eo.no_libvirt_duplicates = o->no_libvirt_duplicates;
    a->e = bm_engine_new(&eo);
    bm_engine_set_policy(a->e, a->policy);
    if ((!o->monitor_only || o->state_explicit) &&
        (r = bm_session_state_load("agent", o->state_path, !a->state_path, bm_engine_ledger(a->e))) < 0) {
        /* a corrupt file that could not be moved aside: serve, but never save over it */
        bm_report("agent", NULL, "%s", bm_error_detail(r));
        bm_report("agent", NULL, "state '%s' is not saved until the agent restarts", o->state_path);
        a->state_path = NULL;
    }
}

/* Every job on the event loop; the connection first, at once. */
static void add_jobs(Agent *a)
{
    BmLoopHooks hooks = {.ctx = a, .passed = on_passed, .save = on_save, .publish = on_publish,
                         .lost = on_lost};
    bm_loop_init(&a->loop, a->e, a->policy->interval_s, a->o->monitor_only, &hooks, now_ms());
    a->t_connect = virEventAddTimeout(0, job_connect, a, NULL);
    a->t_loop = virEventAddTimeout(-1, job_loop, a, NULL);
    arm_loop(a);
    uint64_t wd_usec = bm_notify_watchdog_usec();
    uint64_t wd_ms = wd_usec / 2000 ? wd_usec / 2000 : 1;
    a->t_watchdog = wd_usec ? virEventAddTimeout(wd_ms > INT32_MAX ? INT32_MAX : (int)wd_ms, job_watchdog, a, NULL) : -1;
    a->t_spool = a->o->monitor_only ? -1 : virEventAddTimeout(SPOOL_MS, job_spool, a, NULL);
    a->h_signal = a->signal_fd < 0 ? -1
                                   : virEventAddHandle(a->signal_fd, VIR_EVENT_HANDLE_READABLE,
                                                       on_signalfd, a, NULL);
}

static void remove_jobs(Agent *a)
{
    int timers[] = {a->t_connect, a->t_loop, a->t_spool, a->t_watchdog};
    for (size_t i = 0; i < BM_ARRAY_SIZE(timers); i++)
        if (timers[i] >= 0)
            virEventRemoveTimeout(timers[i]);
    if (a->h_signal >= 0)
        virEventRemoveHandle(a->h_signal);
}

static void stop(Agent *a)
{
    bm_reportp(LOG_INFO, "agent", NULL, "stopping");
    bm_notify("STOPPING=1");
    save_state(a); /* what came since the last pass: changes that ended, spooled ones, errors */
    bm_http_stop(a->http);
    disconnect(a);
    remove_jobs(a);
}

int bm_agent_run(const BmAgentOptions *o)
{
    bm_error_reset();
    Agent a = {.o = o, .cb_lifecycle = -1, .cb_balloon = -1, .cb_vmem = -1, .backoff_s = 1,
               .signal_fd = -1,
               .state_lock_fd = -1};
    tune_malloc();
    int ret = start_serving(&a);
    if (ret < 0) {
        ret = bm_report_failure("agent", NULL, ret);
    } else {
        virEventRegisterDefaultImpl();
        start_engine(&a);
        add_jobs(&a);
        publish(&a);
        while (!a.stop)
            if (virEventRunDefaultImpl() < 0)
                break;
        stop(&a);
        ret = BM_EXIT_OK;
    }
    bm_engine_free(a.e);
    bm_policy_free(a.policy);
    free(a.uri);
    free(a.spool_reported);
    if (a.signal_fd >= 0)
        close(a.signal_fd);
    if (a.state_lock_fd >= 0)
        close(a.state_lock_fd); /* after the last save */
    return ret;
}
