/* SPDX-License-Identifier: MIT */
/* PNG images: an SVG image written by a command, rendered by librsvg into a cairo image
 * surface and saved as PNG, by a module loaded on first use (png_render.c). One drawing
 * code path (the SVG writers) serves both formats. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "png_render.h"

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
/* The renderer module: next to this binary (the build tree, or an installed bin/ with
 * ../lib/), or the install lib dir. Loaded once, on the first image. */
static cts_png_render_fn *load_renderer(char *err, size_t err_size) {
  static cts_png_render_fn *render;
  if (render) return render;
  char path[4096];
  if (!cli_find_module(CTS_PNG_MODULE_NAME, path, sizeof path)) {
    snprintf(err, err_size, "%s was not found next to ctfscope or in its lib directory",
             CTS_PNG_MODULE_NAME);
    return NULL;
  }
  void *const lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(err, err_size, "cannot load %s: %s", path, dlerror());
    return NULL;
  }
  void *const entry = dlsym(lib, CTS_PNG_ENTRY_NAME);
  if (!entry) {
    snprintf(err, err_size, "%s has no %s", path, CTS_PNG_ENTRY_NAME);
    return NULL;
  }
  memcpy(&render, &entry, sizeof render); /* POSIX: dlsym's object pointer is the function */
  return render;
}

int cli_svg_to_png(const char *svg_path, const char *png_path, char *err, size_t err_size) {
  cts_png_render_fn *const render = load_renderer(err, err_size);
  return render ? render(svg_path, png_path, err, err_size) : -ENOTSUP;
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
