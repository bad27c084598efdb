<?php
// Exactly 1 MiB: byte i is 'a' + i % 26 (the same pattern as fcgi_responder's mode=big).
header('Content-Type: application/octet-stream');
echo substr(str_repeat('abcdefghijklmnopqrstuvwxyz', 40330), 0, 1048576);
