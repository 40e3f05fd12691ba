"""The bottom layer: the resolved deployment, its model shape and engine efficiency, precisions (units of a
value) and errors."""
