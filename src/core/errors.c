/* SPDX-License-Identifier: MIT */
#include <ctfscope/errors.h>

const char *cts_strerror(int err) {
  switch (err) {
    case 0:
      return "success";
#define CTS__ERROR_TEXT(name, value, text) \
  case CTS_E_##name:                       \
    return text;
      CTS_ERROR_MAP(CTS__ERROR_TEXT)
#undef CTS__ERROR_TEXT
    default:
      return err < 0 && err > -1000 ? "system error" : "unknown error";
  }
}

const char *cts_err_name(int err) {
  switch (err) {
    case 0:
      return "CTS_OK";
#define CTS__ERROR_NAME(name, value, text) \
  case CTS_E_##name:                       \
    return "CTS_E_" #name;
      CTS_ERROR_MAP(CTS__ERROR_NAME)
#undef CTS__ERROR_NAME
    default:
      return err < 0 && err > -1000 ? "CTS_E_SYSTEM" : "CTS_E_UNKNOWN";
  }
}
