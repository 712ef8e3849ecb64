-- Zone failure survival: writes commit within the home region (low latency);
-- a region outage makes that region's partitions unavailable until they are
-- moved, which the ops CLI does (docs/ops/moving-partitions.md).
ALTER DATABASE {{database}} SURVIVE ZONE FAILURE;
