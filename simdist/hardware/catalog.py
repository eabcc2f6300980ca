"""The built-in hardware catalog: devices, links and systems, every number with its source.

Each record holds the fields of a ``devices.DeviceProfile``, ``LinkProfile`` or
``SystemProfile``; ``HardwareCatalog.default()`` turns them into profiles (checking them).
GB = 10**9 bytes (vendors' unit for bandwidth); GiB = 2**30 bytes (memory capacities).
A user's profile file adds to these or overrides them (``HardwareCatalog.load_file``).
"""

from simdist.hardware.units import GiB

DEVICES = (
    dict(
        name="cpu-core", device_type="CPU",
        # Skylake-SP core with AVX-512: 2 FMA units x 16 fp32 lanes x 2 FLOP x 2.0 GHz (a typical
        # AVX-512 all-core clock of a Xeon Gold, Intel Xeon Scalable spec update) = 128 GFLOP/s.
        peak_flops=2 * 16 * 2 * 2.0e9,
        # Typical single-thread STREAM triad measurement on Skylake-SP (a socket's 6 channels of
        # DDR4-2666 give 128 GB/s, shared by all its cores): teaching round number.
        mem_bandwidth=12 * 10**9,
        memory=4 * GiB,  # teaching assumption: one core's share of a server's RAM
        launch_overhead_ns=2_000,  # teaching assumption: TF executor per-op dispatch on CPU
        efficiency=0.5,  # teaching assumption: typical TF kernels, not a tuned GEMM
    ),
    dict(
        name="gtx-1080-ti", device_type="GPU",
        # NVIDIA GeForce GTX 1080 Ti spec: 3584 CUDA cores x 2 FLOP x 1582 MHz boost.
        peak_flops=3584 * 2 * 1.582e9,
        mem_bandwidth=484 * 10**9,  # NVIDIA spec: 11 Gbps GDDR5X x 352-bit bus / 8
        memory=11 * GiB,  # NVIDIA spec: 11 GB GDDR5X
        launch_overhead_ns=5_000,  # teaching assumption: CUDA launch + TF op dispatch, ~5 us
        efficiency=0.5,  # teaching assumption
    ),
    dict(
        name="k80", device_type="GPU",
        # One GK210 die of a Tesla K80 (TF sees each die as a GPU). NVIDIA K80 datasheet:
        # 2 x 2496 CUDA cores, 8.73 TFLOPS fp32 at 875 MHz boost -> 2496 x 2 x 875 MHz per die.
        peak_flops=2496 * 2 * 0.875e9,
        mem_bandwidth=240 * 10**9,  # K80 datasheet: 480 GB/s per board, half per die
        memory=12 * GiB,  # K80 datasheet: 24 GB GDDR5 per board, half per die
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    dict(
        name="v100", device_type="GPU",
        peak_flops=15.7e12,  # NVIDIA V100 datasheet, SXM2: 15.7 TFLOPS fp32 (125 tensor)
        mem_bandwidth=900 * 10**9,  # V100 datasheet: HBM2 900 GB/s
        memory=16 * GiB,  # V100 datasheet: 16 GB HBM2 (a 32 GB model exists too)
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    dict(
        name="a100", device_type="GPU",
        peak_flops=19.5e12,  # NVIDIA A100 datasheet, SXM4 40GB: 19.5 TFLOPS fp32 (non-tensor)
        mem_bandwidth=1_555 * 10**9,  # A100 datasheet: 40GB HBM2, 1,555 GB/s
        memory=40 * GiB,  # A100 datasheet: 40 GB HBM2
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    dict(
        name="h100", device_type="GPU",
        peak_flops=67e12,  # NVIDIA H100 datasheet, SXM5: 67 TFLOPS fp32 (non-tensor)
        mem_bandwidth=3_350 * 10**9,  # H100 datasheet: HBM3 3.35 TB/s
        memory=80 * GiB,  # H100 datasheet: 80 GB HBM3
        launch_overhead_ns=5_000,  # teaching assumption
        efficiency=0.5,  # teaching assumption
    ),
    dict(
        name="tpu-v3-core", device_type="TPU",
        # Google Cloud TPU v3 docs: 123 TFLOPS bf16 per chip, two TensorCores per chip (MXU peak).
        peak_flops=123e12 / 2,
        mem_bandwidth=450 * 10**9,  # Cloud TPU v3 docs: HBM2 900 GBps per chip, half per core
        memory=16 * GiB,  # Cloud TPU v3 docs: 32 GiB HBM2 per chip, half per core
        launch_overhead_ns=1_000,  # teaching assumption: XLA runs fused, compiled programs
        efficiency=0.5,  # teaching assumption
    ),
)

LINKS = (
    # Ethernet: bandwidth = line rate / 8 (IEEE 802.3); latency = typical one-way small-message
    # latency measured with TCP or MPI for that class of Ethernet (teaching round numbers).
    # message_ns: the part of that latency during which each end's host and NIC are busy with
    # the message (LogP's overhead o, Culler et al. 1993): a TCP message costs each end a
    # system call and the protocol stack, a few us of CPU whatever its size; Keeton, Anderson
    # and Patterson, "LogP Quantified: The Case for Low Overhead Local Area Networks" (Hot
    # Interconnects 1995) found this overhead the dominant cost of small messages on LANs.
    # RDMA posts a work request and polls a completion instead. Teaching round numbers.
    dict(name="1gbe", kind="network",
         latency_ns=30_000,  # typical TCP one-way on 1 GbE: 25-50 us
         bandwidth=125_000_000,  # IEEE 802.3ab 1000BASE-T: 1 Gbit/s / 8
         message_ns=5_000),  # teaching assumption: TCP stack and interrupt per message
    dict(name="10gbe", kind="network",
         latency_ns=10_000,  # typical TCP one-way on 10 GbE
         bandwidth=1_250_000_000,  # IEEE 802.3ae: 10 Gbit/s / 8
         message_ns=2_000),  # teaching assumption: TCP send or receive system call and stack
    dict(name="25gbe", kind="network",
         latency_ns=5_000,  # typical TCP one-way on 25 GbE
         bandwidth=3_125_000_000,  # IEEE 802.3by: 25 Gbit/s / 8
         message_ns=1_500),  # teaching assumption: as 10 GbE, on a newer host
    dict(name="100gbe", kind="network",
         latency_ns=2_000,  # typical MPI over RDMA (RoCE), 100 GbE
         bandwidth=12_500_000_000,  # IEEE 802.3ba: 100 Gbit/s / 8
         message_ns=500),  # teaching assumption: post a work request, poll its completion
    # PCI Express Base Spec 3.0: 8 GT/s x 16 lanes x 128b/130b encoding / 8 = 15.75 GB/s
    # theoretical (CUDA's bandwidthTest measures ~12 GB/s with pinned memory).
    dict(name="pcie3-x16", kind="pcie",
         latency_ns=5_000,  # teaching assumption: a small cudaMemcpy, driver included
         bandwidth=8 * 10**9 * 16 * 128 // 130 // 8),
    # NVLink latency: typical GPU peer-to-peer latency (CUDA sample p2pBandwidthLatencyTest
    # reports 1-3 us): teaching round number. Every pair is assumed fully linked.
    dict(name="nvlink2", kind="nvlink", latency_ns=2_000,
         bandwidth=6 * 25 * 10**9),  # V100 whitepaper: 6 links x 25 GB/s per direction
    dict(name="nvlink3", kind="nvlink", latency_ns=2_000,
         bandwidth=12 * 25 * 10**9),  # A100 whitepaper: 12 links x 25 GB/s per direction
    dict(name="nvlink4", kind="nvlink", latency_ns=2_000,
         bandwidth=18 * 25 * 10**9),  # H100 datasheet: 18 links, 900 GB/s bidirectional
    # Shared memory between processes of one host: typical MPI intra-node measurement (OSU
    # osu_latency ~0.3-0.5 us, osu_bw ~10 GB/s for large messages): teaching round numbers.
    # message_ns 200: copying a small message into and out of the shared segment (teaching
    # assumption). PCIe, NVLink and ICI: 0, a message's fixed cost is within their latency.
    dict(name="shm", kind="shm", latency_ns=500, bandwidth=10 * 10**9, message_ns=200),
    # TPU v3 inter-chip interconnect (Jouppi et al., "A Domain-Specific Supercomputer for
    # Training Deep Neural Networks", CACM 2020): 4 ICI links of 656 Gbit/s per chip; one link,
    # taken as per direction. Latency 1 us is a teaching assumption. Kind "network": it also
    # joins the hosts of a pod.
    dict(name="ici-v3", kind="network", latency_ns=1_000, bandwidth=656 * 10**9 // 8),
)

SYSTEMS = (
    dict(name="cpu", device="cpu-core", intra_link="shm", network="10gbe",
         description="one CPU core per task; shared memory in a machine, 10 GbE between "
                     "machines"),
    dict(name="cpu-1gbe", device="cpu-core", intra_link="shm", network="1gbe",
         description="one CPU core per task; shared memory in a machine, 1 GbE between "
                     "machines"),
    dict(name="gtx1080ti-pcie-10gbe", device="gtx-1080-ti", intra_link="pcie3-x16",
         network="10gbe",
         description="GeForce GTX 1080 Ti workstations: PCIe 3.0 in a machine, 10 GbE between"),
    dict(name="k80-pcie-10gbe", device="k80", intra_link="pcie3-x16", network="10gbe",
         description="Tesla K80 servers (one GK210 per GPU): PCIe 3.0 in a machine, 10 GbE "
                     "between"),
    dict(name="v100-nvlink2-25gbe", device="v100", intra_link="nvlink2", network="25gbe",
         description="DGX-1-like V100 SXM2 servers: NVLink 2 in a machine, 25 GbE between"),
    dict(name="a100-nvlink3-100gbe", device="a100", intra_link="nvlink3", network="100gbe",
         description="DGX A100-like servers: NVLink 3 in a machine, 100 GbE between"),
    dict(name="h100-nvlink4-100gbe", device="h100", intra_link="nvlink4", network="100gbe",
         description="DGX H100-like servers: NVLink 4 in a machine, 100 GbE between"),
    dict(name="tpu-v3", device="tpu-v3-core", intra_link="ici-v3", network="ici-v3",
         description="Cloud TPU v3 pod slice: one TensorCore per device, ICI everywhere"),
)
