/*
 * sigmactl_show.h - sigmactl's output for people: sigmad's replies (JSON
 * for status and spares, event lines for history) as text, times as local
 * dates and durations ("3m12s ago"), never epoch seconds. What came from
 * users (reasons, node names) has its control characters escaped.
 */
#ifndef SIGMACTL_SHOW_H
#define SIGMACTL_SHOW_H

#include <stdint.h>
#include <stdio.h>

#include "eventlog.h"

/*
 * The reply of status or spares (one JSON line) as text, durations counted
 * to now. Returns 0, or -EINVAL with what is wrong in err.
 */
int show_status(const char *reply, int64_t now, FILE *out, char *err,
		size_t errlen);
int show_spares(const char *reply, FILE *out, char *err, size_t errlen);

/*
 * history: one event a line. A recovery's "complete" or "give_up" says how
 * long it took since its "decide" (show_history remembers the decisions it
 * has printed; zero it before the first event).
 */
struct show_history {
	struct {
		uint32_t job;
		int attempt;
		int64_t time;
	} decided[64];
	unsigned next;
};
void show_event(struct show_history *h, const struct evlog_event *ev,
		FILE *out);

#endif /* SIGMACTL_SHOW_H */
