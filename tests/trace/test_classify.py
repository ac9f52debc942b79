"""The class rule table (metrics.md §2)."""

import numpy as np
import pytest

from tpscope.trace.classify import ActivityClass as C
from tpscope.trace.classify import ActivityKind as K
from tpscope.trace.classify import classify, classify_name, comm_rule, is_sync


@pytest.mark.parametrize(
    "name, kind, expected",
    [
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", K.KERNEL, C.COMM),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", K.KERNEL, C.COMM),
        ("NCCLKERNEL_upper", K.KERNEL, C.COMM),
        ("void ncclKernel_SendRecv(ncclDevComm*)", K.KERNEL, C.COMM),
        ("void c10d::symmetric_memory::two_shot_all_reduce_kernel<float>", K.KERNEL, C.COMM),
        ("userbuffers_fp16_sum_inplace_gpu_rw", K.KERNEL, C.COMM),
        ("nvshmemi_transfer_kernel", K.KERNEL, C.COMM),
        ("void vllm::cross_device_reduce_1stage<half>", K.KERNEL, C.COMM),
        ("multimem_all_reduce_kernel", K.KERNEL, C.COMM),
        ("Memcpy PtoP (Device -> Device)", K.MEMCPY, C.COMM),
        ("Memcpy DtoD (Device -> Device)", K.MEMCPY, C.MEMORY),
        ("Memcpy HtoD (Pageable -> Device)", K.MEMCPY, C.MEMORY),
        ("Memset (Device)", K.MEMSET, C.MEMORY),
        ("void at::cuda::(anonymous namespace)::spin_kernel(long)", K.KERNEL, C.FILLER),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", K.KERNEL, C.COMPUTE),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", K.KERNEL, C.COMPUTE),
        ("my_kernel_mentions_nccl_late", K.KERNEL, C.COMPUTE),  # 'nccl' must start the name
    ],
)
def test_rule_table(name, kind, expected):
    assert classify_name(name, kind) == expected


def test_vectorized_classify_broadcasts_per_name():
    symbols = ["gemm", "ncclKernel_x", "Memcpy PtoP", "Memcpy HtoD"]
    ids = np.array([0, 1, 0, 2, 3, 1])
    kinds = np.array([K.KERNEL, K.KERNEL, K.KERNEL, K.MEMCPY, K.MEMCPY, K.KERNEL], dtype=np.int8)
    assert classify(ids, kinds, symbols).tolist() == [
        C.COMPUTE,
        C.COMM,
        C.COMPUTE,
        C.COMM,
        C.MEMORY,
        C.COMM,
    ]


def test_sync_kernels_are_the_symmetric_memory_barriers_and_signals():
    symbols = [
        "c10d::symmetric_memory::barrier_kernel(unsigned int**, int, int, int, unsigned long)",
        "c10d::symmetric_memory::wait_signal_kernel(unsigned int**, int, int, int, unsigned long)",
        "c10d::symmetric_memory::put_signal_kernel(unsigned int**, int, int, int, unsigned long)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "Memcpy PtoP (Device -> Device)",
        "void at::native::barrier_like_gemm",
    ]
    ids = np.array([0, 3, 1, 4, 2, 5, 0, -1])
    assert is_sync(ids, symbols).tolist() == [True, False, True, False, True, False, True, False]
    assert is_sync(np.zeros(0, np.int32), symbols).tolist() == []


@pytest.mark.parametrize(
    "name, kind, library, collective",
    [
        (
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            K.KERNEL,
            "NCCL/RCCL",
            "all_gather",
        ),
        (
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)",
            K.KERNEL,
            "NCCL/RCCL",
            "reduce_scatter",
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
            K.KERNEL,
            "NCCL/RCCL",
            "all_reduce",
        ),
        (
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)",
            K.KERNEL,
            "NCCL/RCCL",
            "send_recv",
        ),
        ("ncclDevKernel_Broadcast_RING_LL(x)", K.KERNEL, "NCCL/RCCL", "broadcast"),
        ("ncclDevKernel_Generic_4(x)", K.KERNEL, "NCCL/RCCL", None),  # unknown: still communication
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
            K.KERNEL,
            "torch symmetric memory",
            "all_reduce",
        ),
        (
            "void c10d::symmetric_memory::barrier_kernel(unsigned int**)",
            K.KERNEL,
            "torch symmetric memory",
            None,
        ),
        ("void deep_ep::internode::dispatch<true, 8, 3>(int4*)", K.KERNEL, "DeepEP", "all_to_all"),
        (
            "void deep_ep::intranode::combine<nv_bfloat16, 8>(nv_bfloat16*)",
            K.KERNEL,
            "DeepEP",
            "all_to_all",
        ),
        (
            "void deep_ep::internode::notify_dispatch<8>(int const*)",
            K.KERNEL,
            "DeepEP",
            "all_to_all",
        ),
        ("void internode::dispatch<false>(int4*)", K.KERNEL, "DeepEP", "all_to_all"),
        ("nvshmemi_proxy_kernel", K.KERNEL, "NVSHMEM", None),
        ("void all_to_all_single_kernel<float>(float*)", K.KERNEL, "all-to-all", "all_to_all"),
        ("Memcpy PtoP (Device -> Device)", K.MEMCPY, "copy-engine peer copy", None),
    ],
)
def test_communication_kernel_table_names_library_and_collective(name, kind, library, collective):
    rule = comm_rule(name, kind)
    assert rule is not None and (rule.library, rule.collective) == (library, collective)
    assert classify_name(name, kind) == C.COMM


def test_compute_kernels_are_no_communication_rule():
    assert comm_rule("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") is None
    assert comm_rule("Memcpy DtoD (Device -> Device)", K.MEMCPY) is None
