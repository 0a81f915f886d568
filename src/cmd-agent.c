/* balloonmgr agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE] [--state FILE]
 * [--proc DIR]: the policy loop of `run` plus /metrics (TLS and basic auth from the web config),
 * keeping the timer's state file. Threads: main (passes, tracking, rendering, state saves),
 * libvirt's event loop (events only set flags), libmicrohttpd's server (serves the last
 * rendering). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "cli.h"
#include "conn.h"
#include "engine.h"
#include "error.h"
#include "http.h"
#include "log.h"
#include "policy.h"
#include "spool.h"
#include "state.h"
#include "webconfig.h"

#define DEFAULT_POLICY BM_POLICY_DEFAULT_PATH /* config.h: SYSCONFDIR/balloonmgr/... */
#define RECONNECT_MAX_S 30
#define REFRESH_MIN_MS 1000
/* how often the host's memory is read between passes, to react to pressure at once */
#define HOST_WATCH_MS 250
/* How often the agent reads the domains between passes while a balloon is inflated, to give a
 * guest that grew short of memory its memory back without waiting for the interval. */
#define GUEST_WATCH_MS 1000

static const char options_help[] =
    "  -p, --policy FILE        policy file (default " DEFAULT_POLICY ";\n"
    "                           built-in defaults when that file does not exist)\n"
    "  -l, --listen ADDR:PORT   serve /metrics there (default " BM_HTTP_DEFAULT_LISTEN ")\n"
    "      --web-config FILE    TLS and basic auth for /metrics: a YAML file in the format of\n"
    "                           Prometheus' exporter-toolkit (tls_server_config,\n"
    "                           basic_auth_users); alias --web.config.file\n"
    "      --state FILE         state file, read at start, saved after every pass and at\n"
    "                           stop (default " BM_STATE_DEFAULT_PATH ", shared with the\n"
    "                           timer's run --once: a host runs one or the other)\n"
    "      --proc DIR           read host memory from DIR instead of /proc (tests)\n"
    "  -n, --dry-run            decide and export, never change a balloon or the state file\n"
    "  -h, --help               show this help\n"
    "\nSignals: SIGHUP reloads the policy and the web config (a bad one is reported, the last\n"
    "good one kept); SIGTERM and SIGINT stop the agent.\n";

static atomic_int stop_requested, reload_requested;
static atomic_int view_dirty, conn_lost, event_loop_stop, xml_dirty;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        atomic_store(&reload_requested, 1);
    else
        atomic_store(&stop_requested, 1);
}

/* ---- libvirt events: they only raise flags for the main thread ---- */

static int on_lifecycle(virConnectPtr c, virDomainPtr d, int event, int detail, void *opaque)
{
    (void)c, (void)d, (void)event, (void)detail, (void)opaque;
    atomic_store(&xml_dirty, 1); /* started, defined, ...: its definition may have changed */
    atomic_store(&view_dirty, 1);
    return 0;
}

static void on_balloon(virConnectPtr c, virDomainPtr d, unsigned long long actual, void *opaque)
{
    (void)c, (void)d, (void)actual, (void)opaque;
    atomic_store(&view_dirty, 1);
}

static void on_close(virConnectPtr c, int reason, void *opaque)
{
    (void)c, (void)reason, (void)opaque;
    atomic_store(&conn_lost, 1);
}

static void tick(int timer, void *opaque)
{
    (void)timer, (void)opaque;
}

static void *event_loop(void *arg)
{
    (void)arg;
    while (!atomic_load(&event_loop_stop))
        if (virEventRunDefaultImpl() < 0)
            bm_sleep_ms(100);
    return NULL;
}

typedef struct {
    const BmGlobal *g;
    const char *policy_path;
    bool policy_explicit;
    virConnectPtr conn;
    int cb_lifecycle, cb_balloon;
    unsigned backoff_s;
    uint64_t next_connect_ns;
    BmEngine e;
    BmHttp *http;
    const char *state_path;      /* NULL: --dry-run, never written */
    char *uri;                   /* what the connection is to (bm_conn_uri()), NULL before */
    char *spool_reported;        /* the spool problem reported last */
    BmStateWriter state_writer;
} Agent;

static int load_policy(const Agent *a, BmPolicy **ret)
{
    _cleanup_free_ char *errors = NULL;
    int r = bm_policy_load_or_default(a->policy_path, a->policy_explicit, ret, &errors);
    if (r < 0)
        bm_log_text(LOG_ERR, errors);
    return r;
}

/* Loads the web config, printing its errors. */
static int load_web_config(const char *path, BmWebConfig **ret)
{
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
        a->e.counters.errors[BM_ERR_WEB_CONFIG]++;
        bm_report("agent", NULL, "web config %s not reloaded: keeping the last good one", path);
        return;
    }
    bool restarted = false;
    int r = bm_http_reconfigure(a->http, wc, &restarted);
    if (r < 0) {
        a->e.counters.errors[BM_ERR_WEB_CONFIG]++;
        bm_report("agent", NULL, "web config %s not applied: %s; keeping the last good one", path,
                  bm_error_detail(r));
    } else {
        bm_reportp(LOG_NOTICE, "agent", NULL, "web config %s reloaded: %s%s", path,
                describe_web(wc, what, sizeof(what)),
                restarted ? "; TLS settings changed: the server was restarted on the same socket"
                          : "");
    }
    bm_webconfig_free(wc);
}

static void disconnect(Agent *a)
{
    if (!a->conn)
        return;
    if (a->cb_lifecycle >= 0)
        virConnectDomainEventDeregisterAny(a->conn, a->cb_lifecycle);
    if (a->cb_balloon >= 0)
        virConnectDomainEventDeregisterAny(a->conn, a->cb_balloon);
    virConnectUnregisterCloseCallback(a->conn, on_close);
    virConnectClose(a->conn);
    a->conn = NULL;
    a->e.conn = NULL;
    a->cb_lifecycle = a->cb_balloon = -1;
}

static bool try_connect(Agent *a)
{
    virConnectPtr c = NULL;
    int r = bm_conn_open(a->g->uri, a->g->readonly, &c);
    if (r < 0) {
        bm_report("agent", NULL, "%s; retrying in %u s", bm_error_detail(r), a->backoff_s);
        a->e.counters.errors[BM_ERR_LIBVIRT]++;
        a->next_connect_ns = bm_now_mono_ns() + (uint64_t)a->backoff_s * 1000000000ull;
        a->backoff_s = a->backoff_s * 2 > RECONNECT_MAX_S ? RECONNECT_MAX_S : a->backoff_s * 2;
        return false;
    }
    a->conn = c;
    a->e.conn = c;
    free(a->uri);
    a->uri = bm_conn_uri(c);
    atomic_store(&conn_lost, 0);
    virConnectRegisterCloseCallback(c, on_close, NULL, NULL);
    virConnectSetKeepAlive(c, 5, 3);
    a->cb_lifecycle = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                       VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), NULL, NULL);
    a->cb_balloon = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE,
                                                     VIR_DOMAIN_EVENT_CALLBACK(on_balloon), NULL, NULL);
    virResetLastError();
    a->backoff_s = 1;
    bm_reportp(LOG_INFO, "agent", NULL, "connected to %s", a->g->uri ? a->g->uri : "libvirt");
    return true;
}

/* Whether a running domain's balloon is below its maximum (the guest watch has work). */
static bool any_ballooned(const BmSnapshot *s)
{
    for (size_t i = 0; i < s->n_domains; i++)
        if (s->domains[i].active && bm_present(s->domains[i].actual_bytes) &&
            bm_present(s->domains[i].max_bytes) && s->domains[i].actual_bytes < s->domains[i].max_bytes)
            return true;
    return false;
}

/* Counts the changes 'set --wait' spooled for this connection; a problem with the spool is
 * reported when it is new (not every pass). Returns how many were counted. */
static int ingest_spool(Agent *a)
{
    if (!a->uri)
        return 0; /* never connected: whose changes would these be */
    _cleanup_free_ char *skipped = NULL;
    int r = bm_spool_ingest(&a->e.counters, a->uri, bm_now_real_ns() / 1000000000ull, &skipped);
    const char *problem = r < 0 ? bm_error_detail(r) : skipped;
    if (problem && (!a->spool_reported || strcmp(problem, a->spool_reported) != 0))
        bm_report("agent", NULL, "warning: %s", problem);
    free(a->spool_reported);
    a->spool_reported = problem ? bm_strdup(problem) : NULL;
    return r;
}

static void publish(Agent *a)
{
    _cleanup_free_ char *text = bm_engine_render(&a->e, a->conn != NULL);
    bm_http_set_metrics(a->http, text);
}

/* Saves the state file (not in --dry-run); a failure is reported once and counted. */
static void save_state(Agent *a)
{
    if (!a->state_path)
        return;
    uint64_t now_s = a->e.pass_now_s ? a->e.pass_now_s : bm_now_real_ns() / 1000000000ull;
    bm_cli_state_save("agent", &a->state_writer, a->state_path, &a->e.prev, &a->e.counters, now_s);
}

static int run(const BmGlobal *g, int argc, char **argv)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"listen", required_argument, NULL, 'l'},
        {"web-config", required_argument, NULL, 'W'},
        {"web.config.file", required_argument, NULL, 'W'},
        {"state", required_argument, NULL, 's'},
        {"proc", required_argument, NULL, 'P'},
        {"dry-run", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    Agent a = {.g = g, .policy_path = DEFAULT_POLICY, .cb_lifecycle = -1, .cb_balloon = -1, .backoff_s = 1};
    const char *listen = BM_HTTP_DEFAULT_LISTEN, *proc_dir = NULL, *web_config = NULL;
    const char *state_path = BM_STATE_DEFAULT_PATH;
    bool state_explicit = false;
    bool dry_run = false;
    int c;
    while ((c = getopt_long(argc, argv, "p:l:nh", opts, NULL)) != -1) {
        switch (c) {
        case 'p': a.policy_path = optarg; a.policy_explicit = true; break;
        case 'l': listen = optarg; break;
        case 'W': web_config = optarg; break;
        case 's': state_path = optarg; state_explicit = true; break;
        case 'P': proc_dir = optarg; break;
        case 'n': dry_run = true; break;
        case 'h': bm_verb_usage(&bm_verb_agent, options_help, stdout); return BM_EXIT_OK;
        default: bm_verb_usage(&bm_verb_agent, options_help, stderr); return BM_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        bm_report("agent", NULL, "unexpected argument '%s'", argv[optind]);
        return BM_EXIT_USAGE;
    }
    BmPolicy *pol = NULL;
    if (load_policy(&a, &pol) < 0) {
        bm_report("agent", NULL, "policy '%s' has errors", a.policy_path);
        return BM_EXIT_USAGE;
    }
    _cleanup_(bm_webconfig_freep) BmWebConfig *wc = NULL;
    if (web_config && load_web_config(web_config, &wc) < 0) {
        bm_report("agent", NULL, "web config '%s' has errors", web_config);
        bm_policy_free(pol);
        return BM_EXIT_USAGE;
    }
    bool writes = !dry_run && !g->readonly, reads = !g->readonly || state_explicit;
    if ((reads && !bm_cli_state_check("agent", state_path, writes)) ||
        !bm_cli_proc_check("agent", proc_dir)) {
        bm_policy_free(pol);
        return BM_EXIT_USAGE;
    }
    int r = bm_http_start(listen, wc, &a.http);
    if (r < 0) {
        bm_report("agent", NULL, "%s", bm_error_detail(r));
        bm_policy_free(pol);
        return bm_exit_for(r);
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    virEventRegisterDefaultImpl();
    int timer = virEventAddTimeout(200, tick, NULL, NULL);
    pthread_t ev;
    pthread_create(&ev, NULL, event_loop, NULL);

    /* monitoring only (-r): read-only libvirt socket, no monitor, no spool, nothing written */
    bool monitor_only = g->readonly;
    if (!monitor_only && bm_spool_create() < 0)
        bm_report("agent", NULL, "warning: %s: changes made by 'set --wait' will not be counted",
                  bm_error_detail(-EIO));
    bm_engine_init(&a.e);
    /* a dry run reads the state but never writes it; monitoring only neither reads the
     * policy agent's state (its counters are not this agent's) unless told to, nor writes */
    if (reads && bm_cli_state_load("agent", state_path, !writes, &a.e.prev, &a.e.counters) < 0)
        a.e.counters.errors[BM_ERR_STATE]++;
    a.state_path = writes ? state_path : NULL;
    a.e.policy = pol;
    a.e.proc_dir = proc_dir;
    a.e.dry_run = dry_run || monitor_only;
    a.e.probe_features = !monitor_only;
    a.e.cache_xml = true;
    char web[96];
    bm_reportp(LOG_INFO, "agent", NULL, "serving /metrics on %s (%s), policy %s, every %u s, state %s%s",
            listen, describe_web(wc, web, sizeof(web)), pol->path, pol->interval_s,
            a.state_path ? a.state_path : "not written",
            monitor_only ? ", monitoring only (read-only connection, no changes)"
            : a.e.dry_run ? ", dry run (no changes)" : "");
    publish(&a);

    uint64_t next_pass = 0, last_refresh = 0, last_spool = 0, last_watch = 0, last_guest_watch = 0;
    bool guest_in_need = false; /* what the last guest watch saw */
    const uint64_t ms = 1000000ull;
    while (!atomic_load(&stop_requested)) {
        if (atomic_exchange(&reload_requested, 0)) {
            BmPolicy *fresh = NULL;
            if (load_policy(&a, &fresh) == 0) {
                bm_policy_free(pol);
                pol = fresh;
                a.e.policy = pol;
                bm_reportp(LOG_NOTICE, "agent", NULL, "policy %s reloaded", pol->path);
            } else {
                a.e.counters.errors[BM_ERR_POLICY]++;
                bm_report("agent", NULL, "policy %s not reloaded: keeping the last good one",
                          a.policy_path);
            }
            if (web_config)
                reload_web_config(&a, web_config);
            publish(&a);
        }
        if (a.conn && atomic_load(&conn_lost)) {
            bm_reportp(LOG_WARNING, "agent", NULL, "lost the libvirt connection; reconnecting");
            a.e.counters.errors[BM_ERR_LIBVIRT]++;
            disconnect(&a);
            bm_tracker_clear(&a.e.tracker);
            a.next_connect_ns = bm_now_mono_ns() + 1000 * ms;
            publish(&a);
        }
        if (atomic_exchange(&xml_dirty, 0))
            a.e.xml_stale = true;
        uint64_t now = bm_now_mono_ns();
        if (!a.conn && now >= a.next_connect_ns) {
            if (try_connect(&a)) {
                next_pass = now;
                a.e.xml_stale = true; /* definitions may have changed while away */
            }
            publish(&a);
        }
        if (a.conn && now - last_watch >= HOST_WATCH_MS * ms) {
            last_watch = now;
            BmHost h;
            bool reclaiming = a.e.have_plan && a.e.plan.mode == BM_HOST_RECLAIM;
            if (!reclaiming && bm_hostmem_read(proc_dir, &h) == 0 && bm_host_under_pressure(&h, pol))
                next_pass = now; /* crossed into pressure: do not wait for the interval */
        }
        if (a.conn && !monitor_only && next_pass > now && now - last_guest_watch >= GUEST_WATCH_MS * ms &&
            a.e.have_snap && any_ballooned(&a.e.snap)) {
            last_guest_watch = now;
            bool need = bm_engine_refresh(&a.e) == 0 &&
                        bm_policy_guest_in_need(&a.e.snap, &a.e.prev, pol,
                                                a.e.snap.taken_real_ns / 1000000000ull);
            /* a ballooned guest grew short: give it memory back now (once per episode: a guest
             * the host cannot help now waits for the interval, not a pass every second) */
            if (need && !guest_in_need)
                next_pass = now;
            guest_in_need = need;
            publish(&a);
        }
        if (a.conn && now >= next_pass) {
            r = bm_engine_pass(&a.e);
            if (r < 0) {
                bm_report("agent", NULL, "pass: %s", bm_error_detail(r));
                if (r == -ECONNRESET)
                    atomic_store(&conn_lost, 1);
            } else {
                for (size_t i = 0; i < a.e.plan.n_decisions; i++) {
                    if (a.e.applied[i].busy)
                        bm_reportp(LOG_WARNING, "agent", a.e.plan.decisions[i].name, "%s", a.e.applied[i].error);
                    if (a.e.applied[i].attempted && !a.e.applied[i].applied)
                        bm_report("agent", a.e.plan.decisions[i].name, "%s, skipping domain",
                                  a.e.applied[i].error);
                }
            }
            atomic_store(&view_dirty, 0);
            last_refresh = now;
            next_pass = now + (uint64_t)pol->interval_s * 1000 * ms;
            save_state(&a); /* before publishing: a failure shows in errors_total at once */
            publish(&a);
        } else if (a.conn && atomic_load(&view_dirty) && now - last_refresh >= REFRESH_MIN_MS * ms) {
            atomic_store(&view_dirty, 0);
            last_refresh = now;
            if (bm_engine_refresh(&a.e) == -ECONNRESET)
                atomic_store(&conn_lost, 1);
            publish(&a);
        }
        if (!monitor_only && now - last_spool >= REFRESH_MIN_MS * ms) {
            last_spool = now;
            if (ingest_spool(&a) > 0) {
                atomic_store(&view_dirty, 1);
                last_refresh = 0;
                publish(&a);
            }
        }
        if (a.conn && a.e.tracker.n_items) {
            size_t before = a.e.tracker.n_items;
            if (bm_engine_poll(&a.e) != before) {
                /* a change ended: read the domains again (drivers without balloon events) */
                atomic_store(&view_dirty, 1);
                last_refresh = 0;
                publish(&a);
            }
        }
        bm_sleep_ms(a.e.tracker.n_items ? BM_WAIT_DEFAULT_POLL_MS : 50);
    }

    bm_reportp(LOG_INFO, "agent", NULL, "stopping");
    save_state(&a); /* what came since the last pass: changes that ended, spooled ones, errors */
    bm_http_stop(a.http);
    disconnect(&a);
    atomic_store(&event_loop_stop, 1);
    pthread_join(ev, NULL);
    virEventRemoveTimeout(timer);
    bm_engine_clear(&a.e);
    bm_policy_free(pol);
    free(a.uri);
    free(a.spool_reported);
    return BM_EXIT_OK;
}

const BmVerb bm_verb_agent = {
    .name = "agent",
    .run = run,
    .synopsis = "agent [--policy FILE] [--listen ADDR:PORT] [--web-config FILE] [--state FILE]\n"
                "             [--proc DIR] [--dry-run]",
    .summary = "Run the policy loop continuously and serve Prometheus metrics on /metrics: inflate\n"
               "latency by SG, reclaimed memory, per-domain and host memory, the agent's health.",
};
