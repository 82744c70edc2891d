import os, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, n):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for size in (16384, 65536, 262144, 1048576):
        t = torch.ones(size // 4)
        for _ in range(3): dist.all_reduce(t)
        ts = []
        for _ in range(20):
            dist.barrier(); s = time.perf_counter(); dist.all_reduce(t); ts.append(time.perf_counter() - s)
        if rank == 0: print(n, size, "median us", round(sorted(ts)[10] * 1e6, 1), "min", round(min(ts) * 1e6, 1))
    dist.destroy_process_group()
if __name__ == "__main__":
    import sys
    n = int(sys.argv[1]); mp.spawn(run, args=(n,), nprocs=n)
