"""The daily partitions shared by every partitioned asset: one partition per landing folder (load date)."""

import dagster as dg

from pipeline.config import first_partition_date

# The UI counts every day from here as a partition ("missing" until run): start near the data.
FIRST_DATE = first_partition_date()

# end_offset=1: today's landing folder is a valid partition as soon as it appears (the sensor's case).
DAILY = dg.DailyPartitionsDefinition(start_date=FIRST_DATE, end_offset=1)
