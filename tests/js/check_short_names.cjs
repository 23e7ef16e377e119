// SPDX-License-Identifier: MIT
// The report's "short names" (cv.shortName in src/report/viewer_mem.js), run by CTest in
// plain node: C++ and Rust names with their template arguments elided, operators kept.
//
// Usage: node check_short_names.cjs VIEWER_MEM_JS
// Exit status: 0 = all good, 1 = a check failed.
'use strict';
const assert = require('assert');
const fs = require('fs');
const vm = require('vm');

const window = { ctsViewer: {} };
vm.runInNewContext(fs.readFileSync(process.argv[2], 'utf8'), { window });
const shortName = window.ctsViewer.shortName;
const cases = [
  ['main (prog.cpp:12)', 'main (prog.cpp:12)'],
  ['void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&) (x.cpp:3)',
   'void std::vector<…>::_M_realloc_insert<…>(__gnu_cxx::__normal_iterator<…>, int const&) (x.cpp:3)'],
  ['_M_emplace_hint_unique<const std::piecewise_construct_t&, std::tuple<int const&>, std::tuple<> >', '_M_emplace_hint_unique<…>'],
  ['alloc::raw_vec::RawVec<T,A>::grow_one', 'alloc::raw_vec::RawVec<…>::grow_one'],
  // libiberty writes a space between operator< and its template arguments.
  ['bool operator< <Foo>(Foo<int> const&, Foo<int> const&)', 'bool operator< <…>(Foo<…> const&, Foo<…> const&)'],
  ['bool operator<=(A const&, A const&)', 'bool operator<=(A const&, A const&)'],
  ['std::ostream& operator<<(std::ostream&, Bar const&)', 'std::ostream& operator<<(std::ostream&, Bar const&)'],
  ['Ptr<int>::operator->()', 'Ptr<…>::operator->()'],
  ['broken<name', 'broken<name'],
  ['', ''],
];
let failures = 0;
for (const [input, want] of cases) {
  try {
    assert.strictEqual(shortName(input), want);
  } catch (e) {
    failures++;
    console.log('FAIL: ' + input + ': ' + e.message);
  }
}
console.log(`${cases.length - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
