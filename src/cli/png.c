/* SPDX-License-Identifier: MIT */
/* PNG images: an SVG image written by a command, rendered by librsvg into a cairo image
 * surface and saved as PNG. One drawing code path (the SVG writers) serves both formats. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#if CTS_UNDER_ASAN
/* fontconfig (under librsvg's text rendering) keeps its configuration and font caches for
 * the life of the process and never frees them: LeakSanitizer would report them at every
 * --png. They are not ours, and not growing; this hook of LeakSanitizer's keeps the asan
 * build's leak checks for everything else. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libfontconfig.so\n";
}
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) {
  return "print_suppressions=0";
}
#endif

#if CTS_HAVE_RSVG
#include <cairo.h>
#include <librsvg/rsvg.h>

/* Our images are a few hundred pixels a side; anything larger is not ours. */
#define MAX_SIDE 8192.0

int cli_svg_to_png(const char *svg_path, const char *png_path, char *err, size_t err_size) {
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

#else

int cli_svg_to_png(const char *svg_path, const char *png_path, char *err, size_t err_size) {
  (void)svg_path;
  (void)png_path;
  snprintf(err, err_size, "this ctfscope was built without librsvg (Debian: librsvg2-dev)");
  return -ENOTSUP;
}

#endif

int cli_write_svg_and_png(const char *svg_path, const char *png_path,
                          int (*write_svg)(const char *path, const void *ctx), const void *ctx,
                          const char *const *inputs, size_t ninputs) {
  /* Both outputs are checked against the inputs before either is written. */
  cts_outfile_t svg_file, png_file;
  int code = svg_path ? cli_output_open(&svg_file, svg_path, inputs, ninputs) : -1;
  if (code >= 0) return code;
  if (png_path && (code = cli_output_open(&png_file, png_path, inputs, ninputs)) >= 0) {
    if (svg_path) cts_outfile_discard(&svg_file);
    return code;
  }
  code = CLI_EXIT_OK;
  char tmp[4096] = "";
  const char *svg = svg_path ? cts_outfile_write_path(&svg_file) : NULL;
  if (!svg) {
    /* No --svg: the SVG goes to a temporary file next to nothing the user asked for. */
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/ctfscope-png-XXXXXX.svg", dir && *dir ? dir : "/tmp");
    const int fd = mkstemps(tmp, 4);
    if (fd < 0) {
      cli_error("cannot create a temporary file in '%s': %s", dir && *dir ? dir : "/tmp",
                strerror(errno));
      tmp[0] = 0;
      code = CLI_EXIT_IO;
    } else {
      close(fd);
      svg = tmp;
    }
  }
  int e = code ? 0 : write_svg(svg, ctx);
  if (e) {
    cli_error("cannot write '%s': %s", svg_path ? svg_path : svg, cts_os_strerror(e));
    code = CLI_EXIT_IO;
  }
  if (png_path && !code) {
    char err[512];
    e = cli_svg_to_png(svg, cts_outfile_write_path(&png_file), err, sizeof err);
    if (e) {
      cli_error("cannot write the PNG image '%s': %s", png_path, err);
      code = e == -ENOTSUP ? CLI_EXIT_USAGE : CLI_EXIT_IO;
    }
  }
  if (tmp[0]) unlink(tmp);
  if (svg_path) code = cli_output_close(&svg_file, code);
  if (png_path) code = cli_output_close(&png_file, code);
  return code;
}
