// Prints what a static program exercises of the C++ runtime (threads,
// exceptions, iostreams, the file system library) and a value computed at
// run time, so the test can tell the program ran to the end.
#include <filesystem>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  std::vector<long> parts(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < parts.size(); ++i) {
    threads.emplace_back([&parts, i] {
      for (long n = 1; n <= 1000; ++n) {
        if (n % 4 == static_cast<long>(i)) parts[i] += n;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string caught;
  try {
    throw std::runtime_error("thrown");
  } catch (const std::exception& e) {
    caught = e.what();
  }
  std::error_code ec;
  bool root_exists = std::filesystem::exists("/", ec);
  std::cout << "sum=" << std::accumulate(parts.begin(), parts.end(), 0L) << " caught=" << caught
            << " root=" << root_exists << " args=" << argc - 1 << (argc > 1 ? std::string(" ") + argv[1] : "")
            << "\n";
  return 0;
}
