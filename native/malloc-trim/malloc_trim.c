/*
 * trim(): glibc's malloc_trim(0). glibc keeps memory that was freed inside its heap for later use and gives
 * back to the system only what lies at the heap's top; after a burst of large, short-lived allocations
 * (request bodies, response buffers) the heap stays at its peak for as long as anything above the freed
 * memory is still in use. malloc_trim returns the whole free pages anywhere in the heap. Elsewhere than on
 * glibc it does nothing and returns false.
 */
#include <node_api.h>
#if defined(__linux__)
#include <malloc.h>
#endif

static napi_value trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value result;
  napi_get_boolean(env, released != 0, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, trim, NULL, &fn);
  napi_set_named_property(env, exports, "trim", fn);
  return exports;
}
