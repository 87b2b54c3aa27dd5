// Package replicas holds tests only: they build the chatmem binary, start
// three `chatmem serve` processes against one shared store (PostgreSQL, or
// a three-master Redis Cluster) and drive them round-robin with concurrent
// clients, checking what a load balancer in front of replicas relies on:
// no acknowledged append lost or duplicated, dense sequence numbers, a read
// on one replica seeing an append acknowledged by another, the others
// going on when one is killed, and each message's facts extracted and its
// summary range summarized once across the replicas (counted in the calls
// of the one fake model they share).
package replicas
