// Whether the tests were built with AddressSanitizer or ThreadSanitizer:
// their runtimes reserve terabytes of shadow memory (no RLIMIT_AS) and
// inflate the resident size (no RSS comparisons).
#pragma once

namespace pocket::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace pocket::test
