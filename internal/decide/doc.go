// Package decide is evictd's decision stage: from a pass's observations,
// pods and pod stats it decides what to do (nothing, reclaim, evict which
// pod and how, or the pods over their own local-storage limits) and words
// it as the kubelet does. It is pure, so the loop and `evictd simulate`
// share it. It also holds the contract the loop and its adapters share:
// eviction requests, evictions in flight, the errors an Evicter wraps and
// the reason of evictd's DisruptionTarget condition.
package decide
