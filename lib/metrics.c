/*
 * metrics.c - the Prometheus text exposition format, as node_exporter's
 * textfile collector reads it: one writer for every metrics file sigma
 * writes (sigma-probe's, sigmad's). See sigma.h.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sigma.h"

void sigma_metrics_init(struct sigma_metrics *m, char *buf, size_t size)
{
	m->buf = buf;
	m->size = size;
	m->used = 0;
	m->full = size == 0;
	if (size)
		buf[0] = '\0';
}

static void metrics_put(struct sigma_metrics *m, const char *fmt, ...)
    SIGMA_PRINTF(2, 3);
static void metrics_put(struct sigma_metrics *m, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (m->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(m->buf + m->used, m->size - m->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= m->size - m->used) {
		m->full = true;
		m->buf[m->used] = '\0'; /* whole lines only */
		return;
	}
	m->used += (size_t)n;
}

/* a label value: backslash, double quote and newline escaped */
static void metrics_label_value(struct sigma_metrics *m, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			metrics_put(m, "\\%c", *v);
		else if (*v == '\n')
			metrics_put(m, "\\n");
		else
			metrics_put(m, "%c", *v);
	}
}

void sigma_metrics_family(struct sigma_metrics *m, const char *name,
			  const char *type, const char *help)
{
	metrics_put(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void sigma_metrics_sample(struct sigma_metrics *m, const char *name,
			  double value, ...)
{
	const char *k, *sep = "{";
	size_t start = m->used;
	va_list ap;

	metrics_put(m, "%s", name);
	va_start(ap, value);
	while ((k = va_arg(ap, const char *))) {
		metrics_put(m, "%s%s=\"", sep, k);
		metrics_label_value(m, va_arg(ap, const char *));
		metrics_put(m, "\"");
		sep = ",";
	}
	va_end(ap);
	if (sep[0] == ',')
		metrics_put(m, "}");
	if (isnan(value))
		metrics_put(m, " NaN\n");
	else if (isinf(value))
		metrics_put(m, value > 0 ? " +Inf\n" : " -Inf\n");
	else
		metrics_put(m, " %.17g\n", value);
	if (m->full && m->size) {
		m->used = start; /* never half a sample */
		m->buf[start] = '\0';
	}
}

int sigma_metrics_end(const struct sigma_metrics *m)
{
	return m->full ? -ENOSPC : (int)m->used;
}

int sigma_metrics_write(const struct sigma_metrics *m, const char *path)
{
	if (m->full)
		return -ENOSPC;
	return sigma_file_write_atomic(path, m->buf, m->used, 0644);
}
