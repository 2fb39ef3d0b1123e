# Waits until the NVIDIA driver under the driver root works, so the plugins
# start on a node whose driver is ready and an operator sees in this
# container's log why they have not. The host's driver root parent is mounted
# at /driver-root-parent (HostToContainer): /driver-root points into it, so a
# driver the GPU operator mounts later appears here without a restart.
root=${NVIDIA_DRIVER_ROOT:-/}
root=${root%/}
if [ -z "$root" ]; then
  target=/driver-root-parent
else
  target=/driver-root-parent/${root##*/}
fi
ln -sfn "$target" /driver-root
echo "driver root ${NVIDIA_DRIVER_ROOT:-/} on the host is /driver-root -> $target here"
trap 'echo "terminated while waiting for the driver"; exit 0' TERM
first() {
  for f in "$@"; do
    if [ -f "$f" ]; then echo "$f"; return; fi
  done
}
attempt=0
while :; do
  smi=$(first /driver-root/opt/bin/nvidia-smi /driver-root/usr/bin/nvidia-smi /driver-root/usr/sbin/nvidia-smi \
    /driver-root/bin/nvidia-smi /driver-root/sbin/nvidia-smi)
  nvml=$(first /driver-root/usr/lib64/libnvidia-ml.so.1 /driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 \
    /driver-root/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1 /driver-root/lib64/libnvidia-ml.so.1 \
    /driver-root/lib/x86_64-linux-gnu/libnvidia-ml.so.1 /driver-root/lib/aarch64-linux-gnu/libnvidia-ml.so.1)
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) nvidia-smi: ${smi:-not found}, libnvidia-ml.so.1: ${nvml:-not found}"
  if [ -n "$smi" ] && [ -n "$nvml" ]; then
    # --version does not initialise GPUs: it succeeds with every GPU bound to
    # vfio-pci too.
    if env -i LD_PRELOAD="$nvml" "$smi" --version; then
      echo "the driver works: starting the plugins"
      exit 0
    fi
    echo "nvidia-smi --version failed with status $?"
  fi
  if [ $((attempt % 6)) -eq 0 ]; then
    echo "The NVIDIA driver is not ready under nvidiaDriverRoot (${NVIDIA_DRIVER_ROOT:-/} on the host)." \
      "Install it there, or set nvidiaDriverRoot to where it is (/run/nvidia/driver with the GPU operator's driver container)."
    if [ "$root" = "" ] && [ -f /driver-root/run/nvidia/driver/usr/bin/nvidia-smi ]; then
      echo "Hint: /run/nvidia/driver/usr/bin/nvidia-smi exists on the host: set nvidiaDriverRoot=/run/nvidia/driver."
    fi
    if [ "$root" = /run/nvidia/driver ]; then
      echo "Hint: /run/nvidia/driver is the GPU operator's driver container: check that it runs and is ready."
    fi
    if [ -n "$root" ] && [ -z "$(ls -A /driver-root 2>/dev/null)" ]; then
      echo "Hint: ${NVIDIA_DRIVER_ROOT} on the host is empty."
    fi
  fi
  attempt=$((attempt + 1))
  # Poll: the driver appears by a mount or a package install that signals
  # nothing this container could wait on.
  sleep 10
done
