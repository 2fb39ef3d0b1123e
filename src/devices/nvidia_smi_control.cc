#include "devices/nvidia_smi_control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace nvdra::devices {

Status RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  return RunCommandWithin(argv, env, kDefaultCommandTimeout);
}

Status RunCommandWithin(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        std::chrono::milliseconds timeout) {
  return RunCommandOutput(argv, env, timeout).status();
}

Result<std::string> RunCommandOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                     std::chrono::milliseconds timeout) {
  if (argv.empty()) return InvalidArgument("empty command");
  int pipefd[2];
  // Close-on-exec: commands started by other threads must not inherit our
  // pipe (they would hold it open and hide this command's exit).
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  // Build everything the child needs before fork: only async-signal-safe
  // calls happen between fork and exec.
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    bool overridden = false;
    for (const auto& o : env) {
      if (kv.compare(0, o.find('=') + 1, o, 0, o.find('=') + 1) == 0) overridden = true;
    }
    if (!overridden) envs.push_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Its own process group, so a timeout kills whatever it started too.
    ::setpgid(0, 0);
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  ::close(pipefd[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  std::string output;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-check the deadline
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed its end: the command is done
    if (output.size() < 64 * 1024) output.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (timed_out) {
    return DeadlineExceeded("command \"" + cmd + "\" did not finish within " + std::to_string(timeout.count()) +
                            " ms and was killed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  return Internal("command \"" + cmd + "\" failed (" +
                  (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                     : "signal " + std::to_string(WTERMSIG(status))) +
                  "): " + output);
}

NvidiaSmiControl::NvidiaSmiControl(std::string nvidia_smi, std::string nvml_library, CommandRunner runner)
    : nvidia_smi_(std::move(nvidia_smi)), nvml_library_(std::move(nvml_library)), runner_(std::move(runner)) {}

Status NvidiaSmiControl::Run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {nvidia_smi_};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  if (!nvml_library_.empty()) {
    const char* pre = std::getenv("LD_PRELOAD");
    env.push_back("LD_PRELOAD=" + nvml_library_ + (pre && *pre ? std::string(":") + pre : ""));
  }
  return runner_(argv, env);
}

Status NvidiaSmiControl::SetTimeSlice(const std::string& gpu_uuid, int interval) {
  NVDRA_RETURN_IF_ERROR(ValidateTimeSlice(interval));
  NVDRA_RETURN_IF_ERROR(Run({"-i", gpu_uuid, "-c", "DEFAULT"}).Wrap("setting compute mode of " + gpu_uuid));
  return Run({"compute-policy", "-i", gpu_uuid, "--set-timeslice", std::to_string(interval)})
      .Wrap("setting time slice of " + gpu_uuid);
}

Status NvidiaSmiControl::SetComputeMode(const std::string& gpu_uuid, const std::string& mode) {
  NVDRA_RETURN_IF_ERROR(ValidateComputeMode(mode));
  return Run({"-i", gpu_uuid, "-c", mode}).Wrap("setting compute mode of " + gpu_uuid);
}

Status NvidiaSmiControl::SetPersistenceMode(const std::string& gpu_uuid, bool enabled) {
  return Run({"-i", gpu_uuid, "-pm", enabled ? "1" : "0"}).Wrap("setting persistence mode of " + gpu_uuid);
}

}  // namespace nvdra::devices
