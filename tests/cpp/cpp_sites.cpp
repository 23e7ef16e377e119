// SPDX-License-Identifier: MIT
// A C++ program whose allocation sites are known: each site_* function allocates a known
// number of bytes through the standard library (std::map, std::vector growth,
// std::string, std::make_shared) or through a wrapper of its own (pool_alloc), and keeps
// every block until exit. With "--expect" it prints, instead of running, "site bytes"
// lines: what each site allocates, rounded up per block to 8-byte words (the memtrace
// unit), which test_cpp_sites.c compares with what ctfscope attributes to each site.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int kMapEntries = 1000;
constexpr int kVectorPushes = 1000;
constexpr int kStrings = 10;
constexpr size_t kStringLength = 100;
constexpr int kShared = 50;
constexpr int kPool = 20;
constexpr size_t kPoolBlock = 200;

struct Payload {
  double values[8];
};

size_t words(size_t bytes) { return (bytes + 7) / 8 * 8; }

// Kept alive until exit so that nothing is freed early (the figures are allocated bytes
// anyway) and the optimiser cannot drop an allocation.
std::map<int, int> *g_map;
std::vector<int> *g_vector;
std::vector<std::string> *g_strings;
std::vector<std::shared_ptr<Payload>> *g_shared;
void *g_pool[kPool];

}  // namespace

// The program's own allocation wrapper, which --drop-frames folds like malloc.
extern "C" __attribute__((noinline)) void *pool_alloc(size_t n) {
  void *p = malloc(n);
  if (!p) abort();
  return p;
}

__attribute__((noinline)) void site_map() {
  for (int i = 0; i < kMapEntries; i++) (*g_map)[i] = i;
}

__attribute__((noinline)) void site_vector() {
  for (int i = 0; i < kVectorPushes; i++) g_vector->push_back(i);
}

__attribute__((noinline)) void site_string() {
  for (int i = 0; i < kStrings; i++) g_strings->push_back(std::string(kStringLength, 'x'));
}

__attribute__((noinline)) void site_shared() {
  for (int i = 0; i < kShared; i++) g_shared->push_back(std::make_shared<Payload>());
}

__attribute__((noinline)) void site_pool() {
  for (int i = 0; i < kPool; i++) g_pool[i] = pool_alloc(kPoolBlock);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--expect") == 0) {
    size_t vector_bytes = 0;
    for (size_t cap = 1; cap <= 1024 && cap / 2 < (size_t)kVectorPushes; cap *= 2)
      vector_bytes += words(cap * sizeof(int));
    printf("site_map %zu\n",
           kMapEntries * words(sizeof(std::_Rb_tree_node<std::pair<const int, int>>)));
    printf("site_vector %zu\n", vector_bytes);
    printf("site_string %zu\n", kStrings * words(kStringLength + 1));
    printf("site_shared %zu\n",
           kShared * words(sizeof(std::_Sp_counted_ptr_inplace<Payload, std::allocator<Payload>,
                                                                __gnu_cxx::_S_atomic>)));
    printf("site_pool %zu\n", kPool * words(kPoolBlock));
    return 0;
  }
  // The containers themselves (and g_strings' and g_shared's growth) are allocated here, in
  // main, not at the sites.
  g_map = new std::map<int, int>;
  g_vector = new std::vector<int>;
  g_strings = new std::vector<std::string>;
  g_strings->reserve(kStrings);
  g_shared = new std::vector<std::shared_ptr<Payload>>;
  g_shared->reserve(kShared);
  site_map();
  site_vector();
  site_string();
  site_shared();
  site_pool();
  return 0;
}
