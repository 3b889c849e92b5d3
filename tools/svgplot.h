/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Line charts as SVG, for the tools' --plot: panels stacked over one time axis. */
#ifndef TOOLS_SVGPLOT_H
#define TOOLS_SVGPLOT_H

#include <stddef.h>
#include <stdio.h>

struct plot_series {
	const char *name;
	const double *x, *y; /* x: seconds from the start */
	size_t n;
};

struct plot_panel {
	const char *title; /* with its unit, e.g. "IOPS" or "p99 latency (ms)" */
	const struct plot_series *series;
	size_t nseries;
};

/* Write the whole document to f: 0, or -EIO if f fails. */
int svg_plot(FILE *f, const char *title, const struct plot_panel *panels, size_t npanels);

#endif
