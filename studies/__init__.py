"""`make paper`: the paper's studies declared as data, run through the project's own programs, recorded in one
store and reported in generated docs (docs/paper.md, docs/benchmarks.md)."""
