// Clang's thread-safety attributes under short names. The build compiles with
// -Wthread-safety -Werror=thread-safety when the compiler is clang, so a
// member read without its mutex, or a call made without a lock the callee
// requires, fails to compile. Other compilers see empty macros.
//
// Use them with nvdra::Mutex and nvdra::MutexLock (util/mutex.h): the
// standard library's mutexes carry no annotations.
//
// gRPC's headers bring Abseil's legacy macros of the same names and meaning
// (GUARDED_BY, NO_THREAD_SAFETY_ANALYSIS, ...); whichever header comes first
// defines them, hence the #ifndef around each.
#pragma once

#if defined(__clang__)
#define NVDRA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define NVDRA_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (a mutex, a role such as "the loop thread").
#ifndef CAPABILITY
#define CAPABILITY(x) NVDRA_THREAD_ANNOTATION(capability(x))
#endif
// An RAII type that holds a capability for its lifetime.
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY NVDRA_THREAD_ANNOTATION(scoped_lockable)
#endif
// Data that may be touched only while holding the given capability.
#ifndef GUARDED_BY
#define GUARDED_BY(x) NVDRA_THREAD_ANNOTATION(guarded_by(x))
#endif
// The pointed-to data (not the pointer) is guarded.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) NVDRA_THREAD_ANNOTATION(pt_guarded_by(x))
#endif
// Lock ordering: this capability is taken before / after the given ones.
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) NVDRA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) NVDRA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#endif
// The caller must hold the capabilities (exclusively / at least shared).
#ifndef REQUIRES
#define REQUIRES(...) NVDRA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) NVDRA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#endif
// The function takes / gives up the capabilities.
#ifndef ACQUIRE
#define ACQUIRE(...) NVDRA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) NVDRA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) NVDRA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) NVDRA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_GENERIC
#define RELEASE_GENERIC(...) NVDRA_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#endif
// Takes the capability only when it returns the given value.
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) NVDRA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE_SHARED
#define TRY_ACQUIRE_SHARED(...) NVDRA_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#endif
// The caller must NOT hold the capabilities (the function takes them itself).
#ifndef EXCLUDES
#define EXCLUDES(...) NVDRA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
// Tells the analysis the capability is held (checked at run time, if at all).
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) NVDRA_THREAD_ANNOTATION(assert_capability(x))
#endif
#ifndef ASSERT_SHARED_CAPABILITY
#define ASSERT_SHARED_CAPABILITY(x) NVDRA_THREAD_ANNOTATION(assert_shared_capability(x))
#endif
// The function returns a reference to the given capability.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) NVDRA_THREAD_ANNOTATION(lock_returned(x))
#endif
// Turns the analysis off for one function. Each use says why in a comment.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS NVDRA_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
