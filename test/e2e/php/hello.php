<?php
echo "hello " . array_sum(range(1, 100));
