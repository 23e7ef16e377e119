/* SPDX-License-Identifier: MIT */
/* The PNG renderer module's entry point (png_render.c), looked up by name with dlsym
 * (png.c). */
#ifndef CTS_CLI_PNG_RENDER_H
#define CTS_CLI_PNG_RENDER_H

#include <stddef.h>

#define CTS_PNG_MODULE_NAME "libctfscope-png.so"
#define CTS_PNG_ENTRY_NAME  "cts_png_render"

/* Renders the SVG file svg_path into the PNG file png_path. Returns 0, or a negative errno
 * value with a sentence in err. Not thread-safe (librsvg's and cairo's global state). */
typedef int cts_png_render_fn(const char *svg_path, const char *png_path, char *err,
                              size_t err_size);
cts_png_render_fn cts_png_render;

#endif
