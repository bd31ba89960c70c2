#include "userspace/tls/session_cache.h"

#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace zn::proxy {
namespace {

class SessionCache {
 public:
  explicit SessionCache(size_t capacity) : capacity_(capacity) {}
  ~SessionCache() {
    for (auto& [key, entry] : entries_) SSL_SESSION_free(entry.first);
  }
  SessionCache(const SessionCache&) = delete;
  SessionCache& operator=(const SessionCache&) = delete;

  // Takes the caller's reference to `session`.
  void put(const std::string& key, SSL_SESSION* session) {
    SSL_SESSION* replaced = nullptr;
    SSL_SESSION* evicted = nullptr;
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) {
        replaced = it->second.first;
        it->second.first = session;
        lru_.splice(lru_.begin(), lru_, it->second.second);
      } else {
        lru_.push_front(key);
        entries_.emplace(key, std::make_pair(session, lru_.begin()));
        if (entries_.size() > capacity_) {
          auto oldest = entries_.find(lru_.back());
          evicted = oldest->second.first;
          entries_.erase(oldest);
          lru_.pop_back();
        }
      }
    }
    if (replaced) SSL_SESSION_free(replaced);
    if (evicted) SSL_SESSION_free(evicted);
  }

  // A new reference to the session kept for `key`, or null.
  SSL_SESSION* get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    SSL_SESSION_up_ref(it->second.first);
    return it->second.first;
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::string> lru_;  // most recently filed first
  std::unordered_map<std::string, std::pair<SSL_SESSION*, std::list<std::string>::iterator>> entries_;
};

void free_cache(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<SessionCache*>(ptr);
}
void free_key(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<std::string*>(ptr); }

// Where a context keeps its cache and a connection its key (made once).
int cache_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_cache);
  return index;
}
int key_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, free_key);
  return index;
}

SessionCache* cache_of(SSL_CTX* ctx) {
  return static_cast<SessionCache*>(SSL_CTX_get_ex_data(ctx, cache_index()));
}

// OpenSSL hands each new session here (after the handshake for TLS 1.2,
// with each ticket for TLS 1.3). A copy is kept: the connection's own
// session object is marked not resumable when that connection is freed
// without a TLS shutdown (as upstream connections are: closed, or reset
// on a timeout), and a kept reference to it could never be resumed.
int on_new_session(SSL* ssl, SSL_SESSION* session) {
  SessionCache* cache = cache_of(SSL_get_SSL_CTX(ssl));
  const auto* key = static_cast<const std::string*>(SSL_get_ex_data(ssl, key_index()));
  if (!cache || !key || SSL_SESSION_is_resumable(session) != 1) return 0;
  if (SSL_SESSION* copy = SSL_SESSION_dup(session)) cache->put(*key, copy);
  return 0;  // the connection keeps its reference
}

}  // namespace

void enable_session_resumption(SSL_CTX* ctx, size_t capacity) {
  if (cache_of(ctx)) return;
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, on_new_session);
  SSL_CTX_set_ex_data(ctx, cache_index(), new SessionCache(capacity));
}

void offer_kept_session(SSL* ssl, const std::string& key) {
  SessionCache* cache = cache_of(SSL_get_SSL_CTX(ssl));
  if (!cache) return;
  SSL_set_ex_data(ssl, key_index(), new std::string(key));
  if (SSL_SESSION* kept = cache->get(key)) {
    SSL_set_session(ssl, kept);  // takes its own reference
    SSL_SESSION_free(kept);
  }
}

}  // namespace zn::proxy
