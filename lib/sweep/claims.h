// claims.h: a sweep claims each point before running it, so that sweeps sharing a store run every point once.
//
// A claim is an open-file-description lock (fcntl F_OFD_SETLK) on one byte of the file `<store>.claims` next to
// the store, at an offset drawn from SHA-256(experiment, point hash): unique per experiment and point, held by a
// live sweep until it has recorded the point, and released by the kernel when its process is gone (kill -9
// included), so a stale claim is taken over by the next sweep without any clean-up. The file stays empty.
#pragma once

#include <cstdint>
#include <string>

namespace prophet::sweep {

class PointClaims {
  public:
    // Opens (creates) `<store_path>.claims`; throws prophet::Error (exit 5) naming the file when it cannot.
    explicit PointClaims(const std::string& store_path);
    ~PointClaims();
    PointClaims(const PointClaims&) = delete;
    PointClaims& operator=(const PointClaims&) = delete;

    // True: this sweep now holds the point's claim; false: a live process holds it.
    bool try_claim(const std::string& experiment, const std::string& point_hash);
    void release(const std::string& experiment, const std::string& point_hash);

    const std::string& path() const { return path_; }

  private:
    std::string path_;
    int fd_ = -1;
};

// The byte a point's claim locks (< 2^62, so it fits off_t).
int64_t claim_offset(const std::string& experiment, const std::string& point_hash);

}  // namespace prophet::sweep
