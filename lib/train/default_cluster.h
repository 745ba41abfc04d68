// default_cluster.h: the default balance.cluster, built into the binary (issue 26 item 12).
//
// `prophet train --config /abs/path.toml` runs from any directory: the default cluster must not be a path relative
// to the working directory. The build copies experiments/clusters/cpu-local.toml into the binary (CMakeLists.txt,
// lib/train/default_cluster.cpp.in); balance.cluster left at its default reads that copy, a balance.cluster set by
// the user reads the file it names.
#pragma once

namespace prophet {

extern const char* const kDefaultClusterPath;  // balance.cluster's default: "experiments/clusters/cpu-local.toml"
extern const char* const kDefaultClusterToml;  // that file's text at build time

}  // namespace prophet
