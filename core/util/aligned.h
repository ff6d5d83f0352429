// std::vector storage on 64-byte (cache line) boundaries. glibc puts large blocks 16 bytes past a page start,
// so every 64-byte row of an AMX tile, or every AVX-512 load of a weight panel, would straddle two cache lines.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gb {

template <class T>
struct line_allocator {
    using value_type = T;
    static constexpr std::align_val_t align{64};
    line_allocator() = default;
    template <class U>
    line_allocator(const line_allocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), align)); }
    void deallocate(T* p, size_t) { ::operator delete(p, align); }
    template <class U>
    bool operator==(const line_allocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const line_allocator<U>&) const { return false; }
};

template <class T>
using aligned_vector = std::vector<T, line_allocator<T>>;

} // namespace gb
