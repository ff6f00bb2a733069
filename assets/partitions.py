"""The daily partitions shared by every partitioned asset: one partition per landing folder (load date)."""

import dagster as dg

# end_offset=1: today's landing folder is a valid partition as soon as it appears (the sensor's case).
DAILY = dg.DailyPartitionsDefinition(start_date="2023-01-01", end_offset=1)
