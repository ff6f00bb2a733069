"""Jobs, schedules, sensors and the Definitions object that wires the assets together."""
