#include "common/thread_name.h"

#include <pthread.h>

namespace zn {

void set_thread_name(const std::string& name) noexcept {
  // TASK_COMM_LEN is 16 with the terminator; pthread_setname_np refuses
  // (ERANGE) rather than cuts a longer one.
  const std::string cut = name.substr(0, 15);
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace zn
