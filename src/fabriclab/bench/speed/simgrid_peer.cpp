// fabriclab's SimGrid peer: one allreduce on an exported platform, the same schedule as fabriclab's.
//
// Rank r runs on host "h<r>" of the platform `fabriclab ... --simgrid` writes. A rank's schedule is a list
// of steps; in each step it posts all its sends (put_async) and receives (get_async) and waits for all of
// them, so a message starts when its sender and its receiver have both reached the step that holds it
// (a rendezvous, fabriclab's semantics). Messages of one ordered pair of ranks go through one mailbox, so
// the k-th send from a to b meets the k-th receive at b from a. The algorithms and their block sizes are
// those of src/fabriclab/collectives (ring.py, recursive.py, direct.py), for any number of ranks.
//
// Build (what `fabriclab bench sim --peer simgrid` runs, caching the binary by this file's hash):
//   g++ -O2 -std=c++17 simgrid_peer.cpp -o simgrid_peer $(pkg-config --cflags --libs simgrid)
// Run:
//   simgrid_peer PLATFORM.xml ALGO RANKS SIZE_BYTES --cfg=network/model:CM02 ...
// ALGO: ring | butterfly-near | butterfly-far | recursive-doubling | ps:SERVERS | direct.
// Prints one line: `simulated_s <time>` (the end of the last rank's last step, %.17g).

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Op {
  bool send;
  int peer;
  double bytes;
};
using Step = std::vector<Op>;

std::string g_algo;
int g_ranks = 0;
long long g_count = 0;  // float32 elements
const int kItemsize = 4;
int g_payload = 0;

// split_counts: the first count % parts blocks get one element more.
long long block_len(long long count, long long parts, long long i) { return count / parts + (i < count % parts); }
long long block_start(long long count, long long parts, long long i) {
  long long extra = count % parts;
  return i * (count / parts) + (i < extra ? i : extra);
}

sg4::Mailbox* box(int src, int dst) { return sg4::Mailbox::by_name(std::to_string(src) + ">" + std::to_string(dst)); }

void run_step(int me, const Step& ops) {
  std::vector<sg4::CommPtr> comms;
  std::vector<int*> got(ops.size());
  comms.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); i++) {
    const Op& op = ops[i];
    if (op.send)
      comms.push_back(box(me, op.peer)->put_async(&g_payload, static_cast<uint64_t>(op.bytes)));
    else
      comms.push_back(box(op.peer, me)->get_async<int>(&got[i]));
  }
  sg4::Comm::wait_all(comms);
}

void ring(int r) {
  const int p = g_ranks;
  const int next = (r + 1) % p, prev = (r - 1 + p) % p;
  for (int phase = 0; phase < 2; phase++)
    for (int s = 0; s < p - 1; s++) {
      // reduce-scatter sends block (r - s - 1), allgather block (r - s); all blocks of split_counts
      long long sb = ((r - s - 1 + phase) % p + p) % p, rb = ((r - s - 2 + phase) % p + p) % p;
      run_step(r, {{true, next, double(block_len(g_count, p, sb) * kItemsize)},
                   {false, prev, double(block_len(g_count, p, rb) * kItemsize)}});
    }
}

// recursive.py: p2 members after the fold (member j is rank 2j+1 for j < rem, else j + rem).
struct Butterfly {
  int p2, rem;
  std::vector<int> masks;
  explicit Butterfly(int p, bool far) {
    p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    rem = p - p2;
    for (int m = 1; m < p2; m *= 2) masks.push_back(m);
    if (far) std::reverse(masks.begin(), masks.end());
  }
  int member(int j) const { return j < rem ? 2 * j + 1 : j + rem; }
  int index(int r) const { return r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem; }
  // first group and number of groups member n holds after `upto` halving steps
  std::pair<long long, long long> held(int n, int upto) const {
    long long base = 0;
    for (int j = 0; j < upto; j++)
      if (n & masks[j]) base += p2 >> (j + 1);
    return {base, p2 >> upto};
  }
  long long span_bytes(long long first, long long num) const {
    return (block_start(g_count, p2, first + num - 1) + block_len(g_count, p2, first + num - 1) -
            block_start(g_count, p2, first)) * kItemsize;
  }
};

void fold(int r, int rem, bool unfold) {
  if (r >= 2 * rem) return;
  bool even = r % 2 == 0;
  bool sender = unfold ? !even : even;
  int peer = even ? r + 1 : r - 1;
  run_step(r, {{sender, peer, double(g_count * kItemsize)}});
}

void butterfly(int r, bool far) {
  Butterfly b(g_ranks, far);
  fold(r, b.rem, false);
  int n = b.index(r);
  if (n >= 0) {
    for (size_t j = 0; j < b.masks.size(); j++) {
      auto [base, size] = b.held(n, j);
      long long half = size / 2;
      long long lower = b.span_bytes(base, half), upper = b.span_bytes(base + half, half);
      bool hi = n & b.masks[j];
      int peer = b.member(n ^ b.masks[j]);
      run_step(r, {{true, peer, double(hi ? lower : upper)}, {false, peer, double(hi ? upper : lower)}});
    }
    for (size_t j = b.masks.size(); j-- > 0;) {
      int partner = n ^ b.masks[j];
      auto [mb, ms] = b.held(n, j + 1);
      auto [tb, ts] = b.held(partner, j + 1);
      int peer = b.member(partner);
      run_step(r, {{true, peer, double(b.span_bytes(mb, ms))}, {false, peer, double(b.span_bytes(tb, ts))}});
    }
  }
  fold(r, b.rem, true);
}

void recursive_doubling(int r) {
  Butterfly b(g_ranks, false);
  fold(r, b.rem, false);
  int n = b.index(r);
  if (n >= 0)
    for (int m = 1; m < b.p2; m *= 2) {
      int peer = b.member(n ^ m);
      run_step(r, {{true, peer, double(g_count * kItemsize)}, {false, peer, double(g_count * kItemsize)}});
    }
  fold(r, b.rem, true);
}

// direct.py: server k is rank k*P/S and holds shard k; push to the servers, then pull from them.
void parameter_server(int r, int servers) {
  const int p = g_ranks;
  std::vector<int> owner(servers);
  std::unordered_map<int, int> shard_of;
  for (int k = 0; k < servers; k++) {
    owner[k] = int((long long)k * p / servers);
    shard_of[owner[k]] = k;
  }
  auto shard = [&](int k) { return double(block_len(g_count, servers, k) * kItemsize); };
  auto mine = shard_of.find(r);
  for (int phase = 0; phase < 2; phase++) {
    Step ops;
    bool push = phase == 0;
    for (int k = 0; k < servers; k++)
      if (owner[k] != r) ops.push_back({push, owner[k], shard(k)});
    if (mine != shard_of.end())
      for (int d = 1; d < p; d++) ops.push_back({!push, ((r - d) % p + p) % p, shard(mine->second)});
    run_step(r, ops);
  }
}

void rank_main(int r) {
  if (g_algo == "ring")
    ring(r);
  else if (g_algo == "butterfly-near" || g_algo == "butterfly-far")
    butterfly(r, g_algo == "butterfly-far");
  else if (g_algo == "recursive-doubling")
    recursive_doubling(r);
  else if (g_algo == "direct")
    parameter_server(r, g_ranks);
  else
    parameter_server(r, std::atoi(g_algo.c_str() + 3));
}

}  // namespace

int main(int argc, char** argv) {
  sg4::Engine e(&argc, argv);
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s PLATFORM.xml ALGO RANKS SIZE_BYTES [--cfg=...]\n", argv[0]);
    return 2;
  }
  g_algo = argv[2];
  g_ranks = std::atoi(argv[3]);
  g_count = std::atoll(argv[4]) / kItemsize;
  bool known = g_algo == "ring" || g_algo == "butterfly-near" || g_algo == "butterfly-far" ||
               g_algo == "recursive-doubling" || g_algo == "direct" ||
               (g_algo.rfind("ps:", 0) == 0 && std::atoi(g_algo.c_str() + 3) >= 1 &&
                std::atoi(g_algo.c_str() + 3) <= g_ranks);
  if (!known || g_ranks < 1) {
    std::fprintf(stderr, "unknown algorithm %s or ranks %d\n", argv[2], g_ranks);
    return 2;
  }
  e.load_platform(argv[1]);
  for (int r = 0; r < g_ranks; r++)
    sg4::Actor::create("rank" + std::to_string(r), sg4::Host::by_name("h" + std::to_string(r)), rank_main, r);
  e.run();
  std::printf("simulated_s %.17g\n", sg4::Engine::get_clock());
  return 0;
}
