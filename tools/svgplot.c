/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A small SVG line-chart writer: each panel a frame with its y range from 0 to a round
 * maximum, one polyline per series, the legend once at the top; no dependencies. */
#include "tools/svgplot.h"

#include <errno.h>
#include <math.h>

#define WIDTH 960
#define LEFT 70
#define RIGHT 20
#define TOP 60
#define PANEL_H 200
#define GAP 50

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
				     "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
#define NCOLORS (sizeof colors / sizeof *colors)

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

/* 1, 2 or 5 times a power of ten, at least v (and above 0). */
static double round_up(double v)
{
	if (!(v > 0))
		return 1;
	double p = pow(10, floor(log10(v)));
	for (int i = 0; i < 3; i++) {
		static const double steps[] = {1, 2, 5};
		if (steps[i] * p >= v)
			return steps[i] * p;
	}
	return 10 * p;
}

static void panel(FILE *f, const struct plot_panel *p, int top, double xmax)
{
	double ymax = 0;
	for (size_t s = 0; s < p->nseries; s++)
		for (size_t i = 0; i < p->series[s].n; i++)
			ymax = p->series[s].y[i] > ymax ? p->series[s].y[i] : ymax;
	ymax = round_up(ymax);
	int w = WIDTH - LEFT - RIGHT;
	fprintf(f, "<g class=\"panel\">\n<text x=\"%d\" y=\"%d\" font-size=\"14\">", LEFT, top - 8);
	xml_text(f, p->title);
	fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		   "stroke=\"#999\"/>\n", LEFT, top, w, PANEL_H);
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
		LEFT - 6, top + 10, ymax);
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">0</text>\n",
		LEFT - 6, top + PANEL_H);
	fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%g s</text>\n",
		LEFT + w, top + PANEL_H + 14, xmax);
	for (size_t s = 0; s < p->nseries; s++) {
		const struct plot_series *ser = &p->series[s];
		fprintf(f, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"%s\" points=\"",
			colors[s % NCOLORS]);
		for (size_t i = 0; i < ser->n; i++)
			fprintf(f, "%s%.1f,%.1f", i ? " " : "", LEFT + w * ser->x[i] / xmax,
				top + PANEL_H - PANEL_H * ser->y[i] / ymax);
		fprintf(f, "\"><title>");
		xml_text(f, ser->name);
		fprintf(f, "</title></polyline>\n");
	}
	fprintf(f, "</g>\n");
}

int svg_plot(FILE *f, const char *title, const struct plot_panel *panels, size_t npanels)
{
	double xmax = 0;
	for (size_t p = 0; p < npanels; p++)
		for (size_t s = 0; s < panels[p].nseries; s++)
			for (size_t i = 0; i < panels[p].series[s].n; i++)
				if (panels[p].series[s].x[i] > xmax)
					xmax = panels[p].series[s].x[i];
	xmax = xmax > 0 ? xmax : 1;
	int height = TOP + (int)npanels * (PANEL_H + GAP);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/"
		   "svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n<title>", WIDTH,
		height);
	xml_text(f, title);
	fprintf(f, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		   "<text x=\"%d\" y=\"24\" font-size=\"16\">", LEFT);
	xml_text(f, title);
	fprintf(f, "</text>\n");
	/* The legend: one entry per series of the first panel (every panel has the same). */
	for (size_t s = 0; npanels && s < panels[0].nseries; s++) {
		int x = LEFT + (int)(s % 4) * 220, y = 42 + (int)(s / 4) * 14;
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
			   "<text x=\"%d\" y=\"%d\" font-size=\"12\">", x, y - 9, colors[s % NCOLORS],
			x + 14, y);
		xml_text(f, panels[0].series[s].name);
		fprintf(f, "</text>\n");
	}
	for (size_t p = 0; p < npanels; p++)
		panel(f, &panels[p], TOP + 20 + (int)p * (PANEL_H + GAP), xmax);
	fprintf(f, "</svg>\n");
	return ferror(f) ? -EIO : 0;
}
