/* otlp.h - OpenTelemetry traces: one span per request, exported as OTLP/HTTP JSON to the
 * collector the standard variables name (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
 * OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; OTEL_EXPORTER_OTLP_HEADERS "k=v,k2=v2";
 * OTEL_SERVICE_NAME, default "tokterm"; OTEL_SDK_DISABLED=true turns it off).
 * Spans are queued (at most OTLP_QUEUE_MAX; more are dropped and counted) and sent in batches
 * by a thread of their own, so an answer never waits for the collector; a collector that
 * fails costs one warning on stderr when the process ends. Prompt and answer text are never
 * part of a span. */
#ifndef TT_NET_OTLP_H
#define TT_NET_OTLP_H

#include <stdint.h>

#define OTLP_QUEUE_MAX 2048
#define OTLP_BATCH 256

struct otlp_span {
    const char *system;          /* gen_ai.system: "openai", "anthropic", ... */
    const char *request_model, *response_model; /* NULL: unknown */
    const char *finish_reason;   /* NULL: none */
    const char *server;          /* server.address (host[:port]) */
    const char *error;           /* NULL when the request succeeded */
    long status;                 /* HTTP status, 0 when none */
    double start, end;           /* unix seconds */
    double ttft;                 /* seconds after start, < 0: no token */
    double dns, connect, tls;    /* seconds after start (curl's view), < 0: unknown */
    long long input_tokens, output_tokens; /* < 0: unknown */
    int retries, rate_limited, cached;
};

/* Queue one span (copied). Does nothing when tracing is not configured or is disabled; the
 * first call reads the environment. Safe from any thread. */
void otlp_span(const struct otlp_span *s);
struct net_result;
/* Queue the span of a finished exchange: api is the profile's dialect (NULL: openai), model
 * the one asked for, server the API host, retries the attempts after the first. */
void otlp_result(const struct net_result *r, const char *api, const char *model,
                 const char *server, int retries);
/* Send what is queued (at most 2 s more) and stop the thread; prints the warning of a
 * failed export. Called at exit too. */
void otlp_shutdown(void);

#endif
