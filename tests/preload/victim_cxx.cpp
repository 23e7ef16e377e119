// SPDX-License-Identifier: MIT
// A C++ victim: new/delete, new[]/delete[] (with and without an array cookie) and
// std::vector growth, all going through the interposed malloc via libstdc++'s operator
// new. Each shape has a size of its own so that the test can count it in the trace.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "victim.h"

namespace {

struct Big {  // new Big: one 44448-byte block
  unsigned char bytes[44448];
};

struct WithDestructor {  // new WithDestructor[7]: 7 * 1000 + an 8-byte cookie = 7008
  unsigned char bytes[1000];
  ~WithDestructor() {
    bytes[0] = 0;
  }
};

struct Record {  // std::vector<Record> grows through 1200 * 2^k bytes
  double values[150];
};

uint64_t checksum = 0;

__attribute__((noinline)) void make_big(int round) {
  Big *b = new Big;
  b->bytes[round] = static_cast<unsigned char>(round);
  checksum += b->bytes[round];
  delete b;
}

__attribute__((noinline)) void make_arrays(int round) {
  int *ints = new int[3333];  // 13332 bytes, no cookie
  ints[round] = round;
  checksum += static_cast<uint64_t>(ints[round]);
  delete[] ints;
  WithDestructor *objs = new WithDestructor[7];
  objs[3].bytes[0] = static_cast<unsigned char>(round);
  checksum += objs[3].bytes[0];
  delete[] objs;
}

__attribute__((noinline)) void grow_vector(int round) {
  std::vector<Record> v;
  for (int i = 0; i < 100; i++) {
    Record r{};
    r.values[0] = round + i;
    v.push_back(r);
  }
  checksum += static_cast<uint64_t>(v.back().values[0]) + v.capacity();
}

}  // namespace

int main() {
  victim_quiet_stdio();
  for (int round = 0; round < 20; round++) {
    make_big(round);
    make_arrays(round);
  }
  for (int round = 0; round < 10; round++) grow_vector(round);
  auto owned = std::make_unique<Big>();  // freed at exit, after the counts are printed
  owned->bytes[0] = 1;
  std::printf("checksum=%llu\n", static_cast<unsigned long long>(checksum));
  return 0;
}
