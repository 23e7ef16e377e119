/* SPDX-License-Identifier: MIT */
/* libctfscope-png.so: renders an SVG image into a PNG file with librsvg and cairo. A module
 * of its own, loaded by `ctfscope` only when an image is asked for (png.c): librsvg brings
 * about 45 libraries, whose loading would otherwise add ~6 ms to every command, `record`
 * included. Its one entry point is cts_png_render (png_render.h). */
#include <cairo.h>
#include <errno.h>
#include <librsvg/rsvg.h>
#include <stdio.h>

#include "png_render.h"

/* Our images are a few hundred pixels a side; anything larger is not ours. */
#define MAX_SIDE 8192.0

__attribute__((visibility("default"))) int cts_png_render(const char *svg_path,
                                                          const char *png_path, char *err,
                                                          size_t err_size) {
  GError *gerr = NULL;
  RsvgHandle *h = rsvg_handle_new_from_file(svg_path, &gerr);
  if (!h) {
    snprintf(err, err_size, "cannot read the SVG image: %s", gerr ? gerr->message : "?");
    if (gerr) g_error_free(gerr);
    return -EINVAL;
  }
  double w = 0, hgt = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(h, &w, &hgt) || w <= 0 || hgt <= 0 ||
      w > MAX_SIDE || hgt > MAX_SIDE) {
    snprintf(err, err_size, "the SVG image has no usable size");
    g_object_unref(h);
    return -EINVAL;
  }
  cairo_surface_t *surface =
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)(w + 0.5), (int)(hgt + 0.5));
  cairo_t *cr = cairo_create(surface);
  const RsvgRectangle viewport = {0, 0, w, hgt};
  int rc = 0;
  if (!rsvg_handle_render_document(h, cr, &viewport, &gerr)) {
    snprintf(err, err_size, "cannot render the SVG image: %s", gerr ? gerr->message : "?");
    if (gerr) g_error_free(gerr);
    rc = -EINVAL;
  }
  cairo_destroy(cr);
  if (!rc) {
    const cairo_status_t st = cairo_surface_write_to_png(surface, png_path);
    if (st != CAIRO_STATUS_SUCCESS) {
      snprintf(err, err_size, "%s", cairo_status_to_string(st));
      rc = -EIO;
    }
  }
  cairo_surface_destroy(surface);
  g_object_unref(h);
  return rc;
}
