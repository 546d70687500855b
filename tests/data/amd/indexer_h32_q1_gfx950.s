; tilelab test fixture: kernels/indexer.hip's indexer_kernel<32, 1> as clang-22 compiled it for gfx950 (-O3, device only; commit fdb6dbd), with only this kernel's descriptor and metadata entry: tests/test_amd_code.c edits it to change the kernel's registers and loop
	.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
	.globl	_Z14indexer_kernelILi32ELi1EEv7IdxArgs
	.p2align	8
	.type	_Z14indexer_kernelILi32ELi1EEv7IdxArgs,@function
_Z14indexer_kernelILi32ELi1EEv7IdxArgs: ; @_Z14indexer_kernelILi32ELi1EEv7IdxArgs
; %bb.0:
	s_load_dwordx16 s[12:27], s[0:1], 0x0
	s_load_dwordx2 s[28:29], s[0:1], 0x40
	s_mov_b32 s3, 0
	v_mov_b64_e32 v[2:3], s[2:3]
	s_mov_b64 s[4:5], 0
	s_waitcnt lgkmcnt(0)
	v_cmp_le_i64_e32 vcc, s[26:27], v[2:3]
	s_mov_b64 s[6:7], s[28:29]
	s_cbranch_vccnz .LBB0_2
; %bb.1:
	s_lshl_b64 s[0:1], s[2:3], 2
	s_add_u32 s4, s22, s0
	s_addc_u32 s5, s23, s1
	s_add_u32 s0, s20, s0
	s_addc_u32 s1, s21, s1
	s_load_dword s8, s[4:5], 0x0
	s_load_dword s6, s[0:1], 0x0
	s_waitcnt lgkmcnt(0)
	s_cmp_lt_i32 s6, s8
	s_cselect_b64 s[0:1], -1, 0
	s_ashr_i32 s7, s6, 31
	v_mov_b64_e32 v[2:3], s[6:7]
	v_cmp_lt_i64_e32 vcc, s[28:29], v[2:3]
	s_and_b64 s[4:5], vcc, exec
	s_cselect_b32 s6, s28, s6
	s_cselect_b32 s7, s29, s7
	s_max_i32 s4, s8, 0
	s_and_b64 s[0:1], s[0:1], exec
	s_cselect_b32 s4, s4, 0
	s_mov_b32 s5, s3
	s_cselect_b32 s7, s7, s29
	s_cselect_b32 s6, s6, s28
.LBB0_2:
	v_mov_b64_e32 v[4:5], s[26:27]
	v_mov_b64_e32 v[12:13], 0
	v_mov_b64_e32 v[2:3], s[2:3]
	v_cmp_lt_i64_e64 s[0:1], s[2:3], v[4:5]
	v_mov_b64_e32 v[6:7], v[12:13]
	s_and_saveexec_b64 s[2:3], s[0:1]
	s_cbranch_execz .LBB0_4
; %bb.3:
	v_lshl_add_u64 v[4:5], v[2:3], 2, s[20:21]
	global_load_dword v6, v[4:5], off
	s_waitcnt vmcnt(0)
	v_ashrrev_i32_e32 v7, 31, v6
.LBB0_4:
	s_or_b64 exec, exec, s[2:3]
	v_mov_b64_e32 v[8:9], v[12:13]
	s_and_saveexec_b64 s[2:3], s[0:1]
	s_cbranch_execz .LBB0_6
; %bb.5:
	v_lshl_add_u64 v[4:5], v[2:3], 2, s[22:23]
	global_load_dword v8, v[4:5], off
	v_mov_b64_e32 v[12:13], v[2:3]
	s_waitcnt vmcnt(0)
	v_ashrrev_i32_e32 v9, 31, v8
.LBB0_6:
	s_or_b64 exec, exec, s[2:3]
	s_ashr_i32 s2, s7, 31
	s_lshr_b32 s2, s2, 27
	s_add_u32 s2, s6, s2
	v_mov_b64_e32 v[2:3], s[6:7]
	s_addc_u32 s3, s7, 0
	v_cmp_gt_i64_e32 vcc, s[4:5], v[2:3]
	s_ashr_i64 s[2:3], s[2:3], 5
	s_and_b64 s[6:7], vcc, exec
	s_cselect_b32 s21, s3, 0
	s_cselect_b32 s20, s2, 0
	v_mad_u64_u32 v[10:11], s[2:3], v12, s28, 0
	s_add_i32 s4, s4, 31
	v_mov_b32_e32 v2, v11
	s_and_b64 s[2:3], vcc, exec
	v_mad_u64_u32 v[2:3], s[2:3], v12, s29, v[2:3]
	s_mov_b32 s11, 0
	s_cselect_b32 s10, s4, 31
	v_mov_b32_e32 v11, v2
	s_and_saveexec_b64 s[8:9], s[0:1]
	s_cbranch_execz .LBB0_23
; %bb.7:
	v_mov_b32_e32 v1, 0
	v_cmp_gt_i64_e32 vcc, s[28:29], v[0:1]
	s_and_b64 exec, exec, vcc
	s_cbranch_execz .LBB0_23
; %bb.8:
	v_mov_b32_e32 v3, -1
	v_not_b32_e32 v2, v0
	v_lshl_add_u64 v[2:3], s[28:29], 0, v[2:3]
	v_lshrrev_b64 v[4:5], 6, v[2:3]
	s_lshl_b64 s[22:23], s[20:21], 5
	s_and_b32 s26, s10, 0xffffffe0
	s_mov_b32 s27, 0
	s_mov_b64 s[2:3], 0
	v_cmp_ne_u64_e32 vcc, 0, v[4:5]
                                        ; implicit-def: $vgpr2_vgpr3
                                        ; implicit-def: $vgpr14_vgpr15
	s_and_saveexec_b64 s[4:5], vcc
	s_xor_b64 s[30:31], exec, s[4:5]
	s_cbranch_execnz .LBB0_11
; %bb.9:
	s_andn2_saveexec_b64 s[4:5], s[30:31]
	s_cbranch_execnz .LBB0_18
.LBB0_10:
	s_or_b64 exec, exec, s[4:5]
	s_and_b64 exec, exec, s[2:3]
	s_cbranch_execnz .LBB0_19
	s_branch .LBB0_23
.LBB0_11:
	v_lshl_add_u64 v[16:17], v[4:5], 0, 1
	v_lshlrev_b64 v[14:15], 2, v[10:11]
	v_lshlrev_b32_e32 v4, 2, v0
	v_mov_b32_e32 v5, 0
	v_lshl_add_u64 v[4:5], v[14:15], 0, v[4:5]
	v_or_b32_e32 v2, 64, v0
	v_mov_b32_e32 v3, v1
	v_lshl_add_u64 v[4:5], s[24:25], 0, v[4:5]
	s_mov_b64 s[2:3], 0x100
	v_and_b32_e32 v18, -2, v16
	v_mov_b32_e32 v19, v17
	v_lshl_add_u64 v[20:21], v[4:5], 0, s[2:3]
	v_mov_b64_e32 v[4:5], v[2:3]
	s_mov_b32 s34, s22
	s_mov_b32 s35, s23
	s_mov_b32 s36, s26
	s_mov_b32 s37, s27
	s_mov_b64 s[38:39], 0
	v_mov_b32_e32 v24, 0xff800000
	s_mov_b64 s[40:41], 0x80
	s_mov_b64 s[42:43], 0x200
	v_mov_b64_e32 v[22:23], v[18:19]
	v_mov_b64_e32 v[2:3], v[0:1]
	s_branch .LBB0_13
.LBB0_12:                               ;   in Loop: Header=BB0_13 Depth=1
	s_or_b64 exec, exec, s[2:3]
	v_lshl_add_u64 v[22:23], v[22:23], 0, -2
	v_cmp_eq_u64_e32 vcc, 0, v[22:23]
	v_lshl_add_u64 v[4:5], v[4:5], 0, s[40:41]
	v_lshl_add_u64 v[2:3], v[2:3], 0, s[40:41]
	s_or_b64 s[38:39], vcc, s[38:39]
	v_lshl_add_u64 v[20:21], v[20:21], 0, s[42:43]
	s_andn2_b64 exec, exec, s[38:39]
	s_cbranch_execz .LBB0_17
.LBB0_13:                               ; =>This Inner Loop Header: Depth=1
	v_cmp_gt_i64_e64 s[4:5], s[22:23], v[2:3]
	v_cmp_le_u64_e64 s[6:7], s[26:27], v[2:3]
	v_cmp_gt_i64_e32 vcc, s[34:35], v[4:5]
	v_cmp_le_u64_e64 s[2:3], s[36:37], v[4:5]
	s_or_b64 s[6:7], s[4:5], s[6:7]
	s_and_saveexec_b64 s[4:5], s[6:7]
	s_cbranch_execz .LBB0_15
; %bb.14:                               ;   in Loop: Header=BB0_13 Depth=1
	global_store_dword v[20:21], v24, off offset:-256
.LBB0_15:                               ;   in Loop: Header=BB0_13 Depth=1
	s_or_b64 exec, exec, s[4:5]
	s_or_b64 s[4:5], vcc, s[2:3]
	s_and_saveexec_b64 s[2:3], s[4:5]
	s_cbranch_execz .LBB0_12
; %bb.16:                               ;   in Loop: Header=BB0_13 Depth=1
	global_store_dword v[20:21], v24, off
	s_branch .LBB0_12
.LBB0_17:
	s_or_b64 exec, exec, s[38:39]
	v_lshlrev_b64 v[2:3], 6, v[18:19]
	v_cmp_ne_u64_e32 vcc, v[16:17], v[18:19]
	v_or_b32_e32 v2, v2, v0
	s_and_b64 s[2:3], vcc, exec
	s_andn2_saveexec_b64 s[4:5], s[30:31]
	s_cbranch_execz .LBB0_10
.LBB0_18:
	v_lshlrev_b64 v[14:15], 2, v[10:11]
	s_or_b64 s[2:3], s[2:3], exec
	v_mov_b64_e32 v[2:3], v[0:1]
	s_or_b64 exec, exec, s[4:5]
	s_and_b64 exec, exec, s[2:3]
	s_cbranch_execz .LBB0_23
.LBB0_19:
	v_lshl_add_u64 v[4:5], v[2:3], 2, v[14:15]
	v_lshl_add_u64 v[4:5], s[24:25], 0, v[4:5]
	s_mov_b64 s[4:5], 0
	v_mov_b32_e32 v1, 0xff800000
	s_mov_b64 s[6:7], 0x100
	s_branch .LBB0_21
.LBB0_20:                               ;   in Loop: Header=BB0_21 Depth=1
	s_or_b64 exec, exec, s[2:3]
	v_lshl_add_u64 v[2:3], v[2:3], 0, 64
	v_cmp_le_i64_e32 vcc, s[28:29], v[2:3]
	s_or_b64 s[4:5], vcc, s[4:5]
	v_lshl_add_u64 v[4:5], v[4:5], 0, s[6:7]
	s_andn2_b64 exec, exec, s[4:5]
	s_cbranch_execz .LBB0_23
.LBB0_21:                               ; =>This Inner Loop Header: Depth=1
	v_cmp_gt_i64_e32 vcc, s[22:23], v[2:3]
	v_cmp_le_u64_e64 s[2:3], s[26:27], v[2:3]
	s_or_b64 s[30:31], vcc, s[2:3]
	s_and_saveexec_b64 s[2:3], s[30:31]
	s_cbranch_execz .LBB0_20
; %bb.22:                               ;   in Loop: Header=BB0_21 Depth=1
	global_store_dword v[4:5], v1, off
	s_branch .LBB0_20
.LBB0_23:
	s_or_b64 exec, exec, s[8:9]
	s_lshr_b32 s10, s10, 5
	v_mov_b64_e32 v[2:3], s[20:21]
	v_cmp_le_i64_e32 vcc, s[10:11], v[2:3]
	s_cbranch_vccnz .LBB0_66
; %bb.24:
	v_lshlrev_b64 v[2:3], 12, v[12:13]
	v_lshlrev_b32_e32 v1, 7, v0
	v_lshl_add_u64 v[2:3], s[12:13], 0, v[2:3]
	v_lshlrev_b64 v[4:5], 7, v[12:13]
	v_and_b32_e32 v12, 0x780, v1
	v_mov_b32_e32 v13, 0
	v_lshl_add_u64 v[2:3], v[2:3], 0, v[12:13]
	v_and_b32_e32 v12, 48, v0
	v_and_b32_e32 v22, 15, v0
	v_lshl_add_u64 v[4:5], s[18:19], 0, v[4:5]
	v_lshl_add_u64 v[2:3], v[2:3], 0, v[12:13]
	v_lshlrev_b32_e32 v14, 2, v22
	v_mov_b32_e32 v15, v13
	v_lshl_add_u64 v[4:5], v[4:5], 0, v[14:15]
	global_load_dwordx4 v[58:61], v[2:3], off offset:2048
	global_load_dwordx4 v[62:65], v[2:3], off offset:2112
	global_load_dword v23, v[4:5], off
	global_load_dword v24, v[4:5], off offset:64
	global_load_dwordx4 v[50:53], v[2:3], off
	global_load_dwordx4 v[54:57], v[2:3], off offset:64
	s_movk_i32 s2, 0x100
	s_lshl_b64 s[12:13], s[20:21], 5
	v_cmp_gt_u32_e64 s[2:3], s2, v0
	v_lshrrev_b32_e32 v14, 3, v0
	v_and_b32_e32 v16, 7, v0
	s_and_saveexec_b64 s[4:5], s[2:3]
	s_cbranch_execz .LBB0_29
; %bb.25:
	v_lshlrev_b32_e32 v2, 4, v16
	s_movk_i32 s6, 0x90
	v_mad_u32_u24 v17, v14, s6, v2
	s_lshl_b64 s[6:7], s[20:21], 12
	v_lshlrev_b32_e32 v3, 7, v14
	v_mov_b32_e32 v15, v13
	v_or3_b32 v2, s6, v3, v2
	v_mov_b32_e32 v3, s7
	v_or_b32_e32 v1, 0xffffffc0, v0
	v_lshl_add_u64 v[2:3], s[14:15], 0, v[2:3]
	v_lshl_add_u64 v[4:5], v[14:15], 0, s[12:13]
	s_mov_b64 s[6:7], 0
	s_mov_b64 s[8:9], 0x400
	s_movk_i32 s22, 0xbf
	s_branch .LBB0_27
.LBB0_26:                               ;   in Loop: Header=BB0_27 Depth=1
	s_or_b64 exec, exec, s[18:19]
	v_add_u32_e32 v1, 64, v1
	v_cmp_lt_u32_e32 vcc, s22, v1
	s_waitcnt vmcnt(0)
	ds_write_b128 v17, v[18:21]
	v_add_u32_e32 v17, 0x480, v17
	v_lshl_add_u64 v[2:3], v[2:3], 0, s[8:9]
	s_or_b64 s[6:7], vcc, s[6:7]
	v_lshl_add_u64 v[4:5], v[4:5], 0, 8
	s_andn2_b64 exec, exec, s[6:7]
	s_cbranch_execz .LBB0_29
.LBB0_27:                               ; =>This Inner Loop Header: Depth=1
	v_cmp_gt_i64_e32 vcc, s[28:29], v[4:5]
	v_mov_b32_e32 v18, 0
	v_mov_b32_e32 v19, 0
	v_mov_b32_e32 v20, 0
	v_mov_b32_e32 v21, 0
	s_and_saveexec_b64 s[18:19], vcc
	s_cbranch_execz .LBB0_26
; %bb.28:                               ;   in Loop: Header=BB0_27 Depth=1
	global_load_dwordx4 v[18:21], v[2:3], off
	s_branch .LBB0_26
.LBB0_29:
	s_or_b64 exec, exec, s[4:5]
	v_cmp_gt_u32_e64 s[4:5], 32, v0
	v_cmp_lt_u32_e32 vcc, 31, v0
                                        ; implicit-def: $vgpr2_vgpr3
	s_and_saveexec_b64 s[6:7], vcc
	s_xor_b64 s[6:7], exec, s[6:7]
; %bb.30:
	v_mov_b32_e32 v1, 0
	v_mov_b64_e32 v[2:3], v[0:1]
; %bb.31:
	s_andn2_saveexec_b64 s[6:7], s[6:7]
	s_cbranch_execz .LBB0_35
; %bb.32:
	v_or_b32_e32 v2, s12, v0
	v_mov_b32_e32 v3, s13
	v_mov_b32_e32 v1, 0
	v_cmp_gt_i64_e32 vcc, s[28:29], v[2:3]
	v_mov_b32_e32 v4, 0
	s_and_saveexec_b64 s[8:9], vcc
	s_cbranch_execz .LBB0_34
; %bb.33:
	v_lshl_add_u64 v[2:3], v[2:3], 2, s[16:17]
	global_load_dword v4, v[2:3], off
.LBB0_34:
	s_or_b64 exec, exec, s[8:9]
	v_lshlrev_b32_e32 v2, 2, v0
	s_waitcnt vmcnt(0)
	ds_write_b32 v2, v4 offset:9216
	v_mov_b64_e32 v[2:3], v[0:1]
.LBB0_35:
	s_or_b64 exec, exec, s[6:7]
	v_lshlrev_b64 v[18:19], 2, v[10:11]
	s_movk_i32 s18, 0x90
	v_lshrrev_b32_e32 v10, 2, v0
	v_mad_u32_u24 v25, v22, s18, v12
	v_and_b32_e32 v10, 12, v10
	v_mov_b32_e32 v11, 0x2400
	v_lshlrev_b32_e32 v15, 4, v16
	v_lshrrev_b64 v[12:13], 3, v[2:3]
	v_lshl_or_b32 v26, v10, 2, v11
	v_or_b32_e32 v27, v10, v22
	v_mad_u32_u24 v30, v14, s18, v15
	s_lshl_b64 s[18:19], s[20:21], 12
	v_lshlrev_b64 v[10:11], 7, v[12:13]
	v_lshl_add_u64 v[10:11], s[18:19], 0, v[10:11]
	v_lshl_add_u64 v[12:13], v[12:13], 0, s[12:13]
	s_lshl_b64 s[12:13], s[20:21], 7
	v_lshl_add_u64 v[4:5], s[24:25], 0, v[18:19]
	v_mov_b32_e32 v1, 0
	v_or_b32_e32 v10, v10, v15
	v_lshl_add_u64 v[14:15], v[18:19], 0, s[12:13]
	v_mbcnt_lo_u32_b32 v18, -1, 0
	v_lshlrev_b32_e32 v20, 2, v0
	v_mov_b32_e32 v21, v1
	v_mbcnt_hi_u32_b32 v33, -1, v18
	v_lshl_add_u64 v[10:11], s[14:15], 0, v[10:11]
	s_mov_b64 s[14:15], 0x1000
	v_lshl_add_u64 v[14:15], v[14:15], 0, v[20:21]
	v_and_b32_e32 v18, 64, v33
	v_cmp_gt_u32_e64 s[6:7], 4, v22
	v_cmp_eq_u32_e64 s[8:9], 2, v22
	v_or_b32_e32 v28, 0x2400, v20
	v_or_b32_e32 v29, 0xffffffc0, v0
	v_lshl_add_u64 v[10:11], v[10:11], 0, s[14:15]
	v_lshl_add_u64 v[12:13], v[12:13], 0, 32
	v_lshl_add_u64 v[14:15], s[24:25], 0, v[14:15]
	s_mov_b64 s[18:19], -1
	v_mov_b64_e32 v[16:17], s[10:11]
	s_movk_i32 s33, 0x1200
	s_mov_b64 s[22:23], 0x400
	s_movk_i32 s44, 0xbf
	v_mov_b32_e32 v31, 0xff800000
	s_mov_b64 s[24:25], 0x100
	v_mov_b32_e32 v32, 0x7f
	s_mov_b64 s[26:27], 0x80
	v_add_u32_e32 v34, 64, v18
	v_xor_b32_e32 v35, 1, v33
	v_xor_b32_e32 v36, 2, v33
	v_xor_b32_e32 v37, 4, v33
	v_xor_b32_e32 v38, 8, v33
	s_mov_b64 s[30:31], s[20:21]
	s_branch .LBB0_37
.LBB0_36:                               ;   in Loop: Header=BB0_37 Depth=1
	s_or_b64 exec, exec, s[34:35]
	s_xor_b64 s[18:19], s[18:19], -1
	v_lshl_add_u64 v[10:11], v[10:11], 0, s[14:15]
	v_lshl_add_u64 v[12:13], v[12:13], 0, 32
	s_andn2_b64 vcc, exec, s[10:11]
	v_lshl_add_u64 v[14:15], v[14:15], 0, s[26:27]
	s_cbranch_vccz .LBB0_66
.LBB0_37:                               ; =>This Loop Header: Depth=1
                                        ;     Child Loop BB0_41 Depth 2
                                        ;     Child Loop BB0_52 Depth 2
                                        ;     Child Loop BB0_57 Depth 2
	s_mov_b64 s[12:13], s[30:31]
	s_sub_u32 s21, s12, s20
	s_add_u32 s30, s12, 1
	s_addc_u32 s31, s13, 0
	v_cmp_ge_i64_e64 s[10:11], s[30:31], v[16:17]
	s_and_b64 vcc, exec, s[10:11]
	s_waitcnt lgkmcnt(0)
	; wave barrier
	s_cbranch_vccnz .LBB0_48
; %bb.38:                               ;   in Loop: Header=BB0_37 Depth=1
	s_and_saveexec_b64 s[34:35], s[2:3]
	s_cbranch_execz .LBB0_43
; %bb.39:                               ;   in Loop: Header=BB0_37 Depth=1
	v_cndmask_b32_e64 v18, 0, 1, s[18:19]
	v_mul_lo_u32 v18, v18, s33
	v_add_u32_e32 v39, v30, v18
	s_mov_b64 s[36:37], 0
	v_mov_b64_e32 v[18:19], v[12:13]
	v_mov_b64_e32 v[20:21], v[10:11]
	v_mov_b32_e32 v40, v29
	s_branch .LBB0_41
.LBB0_40:                               ;   in Loop: Header=BB0_41 Depth=2
	s_or_b64 exec, exec, s[38:39]
	v_add_u32_e32 v40, 64, v40
	v_cmp_lt_u32_e32 vcc, s44, v40
	s_waitcnt vmcnt(0)
	ds_write_b128 v39, v[42:45]
	v_add_u32_e32 v39, 0x480, v39
	v_lshl_add_u64 v[20:21], v[20:21], 0, s[22:23]
	s_or_b64 s[36:37], vcc, s[36:37]
	v_lshl_add_u64 v[18:19], v[18:19], 0, 8
	s_andn2_b64 exec, exec, s[36:37]
	s_cbranch_execz .LBB0_43
.LBB0_41:                               ;   Parent Loop BB0_37 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
	v_cmp_gt_i64_e32 vcc, s[28:29], v[18:19]
	v_mov_b32_e32 v42, 0
	v_mov_b32_e32 v43, 0
	v_mov_b32_e32 v44, 0
	v_mov_b32_e32 v45, 0
	s_and_saveexec_b64 s[38:39], vcc
	s_cbranch_execz .LBB0_40
; %bb.42:                               ;   in Loop: Header=BB0_41 Depth=2
	global_load_dwordx4 v[42:45], v[20:21], off
	s_branch .LBB0_40
.LBB0_43:                               ;   in Loop: Header=BB0_37 Depth=1
	s_or_b64 exec, exec, s[34:35]
	s_and_saveexec_b64 s[34:35], s[4:5]
	s_cbranch_execz .LBB0_47
; %bb.44:                               ;   in Loop: Header=BB0_37 Depth=1
	s_lshl_b64 s[36:37], s[30:31], 5
	v_or_b32_e32 v19, s37, v3
	v_or_b32_e32 v18, s36, v2
	v_cmp_gt_i64_e32 vcc, s[28:29], v[18:19]
	v_mov_b32_e32 v20, 0
	s_and_saveexec_b64 s[36:37], vcc
	s_cbranch_execz .LBB0_46
; %bb.45:                               ;   in Loop: Header=BB0_37 Depth=1
	v_lshl_add_u64 v[18:19], v[18:19], 2, s[16:17]
	global_load_dword v20, v[18:19], off
.LBB0_46:                               ;   in Loop: Header=BB0_37 Depth=1
	s_or_b64 exec, exec, s[36:37]
	s_andn2_b32 s36, 1, s21
	v_lshl_add_u32 v18, s36, 7, v28
	s_waitcnt vmcnt(0)
	ds_write_b32 v18, v20
.LBB0_47:                               ;   in Loop: Header=BB0_37 Depth=1
	s_or_b64 exec, exec, s[34:35]
.LBB0_48:                               ;   in Loop: Header=BB0_37 Depth=1
	s_and_saveexec_b64 s[34:35], s[0:1]
	s_cbranch_execz .LBB0_36
; %bb.49:                               ;   in Loop: Header=BB0_37 Depth=1
	s_lshl_b64 s[36:37], s[12:13], 5
	s_add_u32 s38, s36, 32
	s_addc_u32 s39, s37, 0
	v_cmp_ge_i64_e32 vcc, s[36:37], v[8:9]
	v_cmp_le_i64_e64 s[12:13], s[38:39], v[6:7]
	s_or_b64 s[12:13], vcc, s[12:13]
	s_and_saveexec_b64 s[40:41], s[12:13]
	s_xor_b64 s[12:13], exec, s[40:41]
	s_cbranch_execz .LBB0_54
; %bb.50:                               ;   in Loop: Header=BB0_37 Depth=1
	v_mov_b64_e32 v[20:21], s[28:29]
	v_cmp_lt_i64_e32 vcc, s[38:39], v[20:21]
	s_and_b64 s[40:41], vcc, exec
	v_lshl_add_u64 v[18:19], s[36:37], 0, v[0:1]
	s_cselect_b32 s39, s39, s29
	s_cselect_b32 s38, s38, s28
	v_cmp_gt_i64_e32 vcc, s[38:39], v[18:19]
	s_and_saveexec_b64 s[40:41], vcc
	s_cbranch_execz .LBB0_53
; %bb.51:                               ;   in Loop: Header=BB0_37 Depth=1
	s_mov_b64 s[42:43], 0
	v_mov_b64_e32 v[20:21], v[14:15]
.LBB0_52:                               ;   Parent Loop BB0_37 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
	v_lshl_add_u64 v[18:19], v[18:19], 0, 64
	v_cmp_le_i64_e32 vcc, s[38:39], v[18:19]
	global_store_dword v[20:21], v31, off
	s_or_b64 s[42:43], vcc, s[42:43]
	v_lshl_add_u64 v[20:21], v[20:21], 0, s[24:25]
	s_andn2_b64 exec, exec, s[42:43]
	s_cbranch_execnz .LBB0_52
.LBB0_53:                               ;   in Loop: Header=BB0_37 Depth=1
	s_or_b64 exec, exec, s[40:41]
.LBB0_54:                               ;   in Loop: Header=BB0_37 Depth=1
	s_andn2_saveexec_b64 s[12:13], s[12:13]
	s_cbranch_execz .LBB0_36
; %bb.55:                               ;   in Loop: Header=BB0_37 Depth=1
	v_cmp_lt_i32_e32 vcc, v35, v34
	s_and_b32 s12, s21, 1
	s_mul_i32 s13, s12, 0x1200
	v_cndmask_b32_e32 v18, v33, v35, vcc
	v_cmp_lt_i32_e32 vcc, v36, v34
	v_lshlrev_b32_e32 v39, 2, v18
	v_add_u32_e32 v20, s13, v25
	v_cndmask_b32_e32 v18, v33, v36, vcc
	v_cmp_lt_i32_e32 vcc, v37, v34
	v_lshlrev_b32_e32 v40, 2, v18
	v_lshl_add_u32 v21, s12, 7, v26
	v_cndmask_b32_e32 v18, v33, v37, vcc
	v_cmp_lt_i32_e32 vcc, v38, v34
	v_lshlrev_b32_e32 v41, 2, v18
	s_mov_b32 s21, 0
	v_cndmask_b32_e32 v18, v33, v38, vcc
	v_lshlrev_b32_e32 v42, 2, v18
	s_mov_b64 s[38:39], -1
	s_waitcnt vmcnt(0)
	s_branch .LBB0_57
.LBB0_56:                               ;   in Loop: Header=BB0_57 Depth=2
	s_or_b64 exec, exec, s[40:41]
	s_xor_b64 s[12:13], s[38:39], -1
	s_mov_b32 s21, 1
	s_mov_b64 s[38:39], 0
	s_and_b64 vcc, exec, s[12:13]
	s_cbranch_vccnz .LBB0_36
.LBB0_57:                               ;   Parent Loop BB0_37 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
	s_mul_i32 s12, s21, 0x900
	v_add_u32_e32 v18, s12, v20
	ds_read_b128 v[70:73], v18
	ds_read_b128 v[74:77], v18 offset:64
	v_lshl_add_u32 v18, s21, 6, v21
	ds_read_b128 v[66:69], v18
	s_waitcnt lgkmcnt(1)
	v_mfma_scale_f32_16x16x128_f8f6f4 v[44:47], v[70:77], v[50:57], 0, v32, v32 op_sel_hi:[0,0,0]
	v_mfma_scale_f32_16x16x128_f8f6f4 v[70:73], v[70:77], v[58:65], 0, v32, v32 op_sel_hi:[0,0,0]
	s_waitcnt lgkmcnt(0)
	s_nop 9
	v_mul_f32_e32 v18, v66, v44
	v_max_f32_e32 v18, 0, v18
	v_mul_f32_e32 v43, v67, v45
	v_mul_f32_e32 v45, v68, v46
	v_fma_f32 v18, v23, v18, 0
	v_max_f32_e32 v45, 0, v45
	v_max_f32_e32 v43, 0, v43
	v_mul_f32_e32 v19, v66, v70
	v_max_f32_e32 v19, 0, v19
	v_fmac_f32_e32 v18, v24, v19
	v_mul_f32_e32 v19, v68, v72
	v_mul_f32_e32 v44, v67, v71
	v_fma_f32 v45, v23, v45, 0
	v_max_f32_e32 v19, 0, v19
	v_max_f32_e32 v44, 0, v44
	v_fma_f32 v43, v23, v43, 0
	v_fmac_f32_e32 v45, v24, v19
	v_mul_f32_e32 v19, v69, v47
	v_fmac_f32_e32 v43, v24, v44
	v_max_f32_e32 v19, 0, v19
	v_mul_f32_e32 v44, v69, v73
	v_fma_f32 v19, v23, v19, 0
	v_max_f32_e32 v44, 0, v44
	v_fmac_f32_e32 v19, v24, v44
	ds_bpermute_b32 v44, v39, v18
	ds_bpermute_b32 v46, v39, v43
	ds_bpermute_b32 v47, v39, v45
	ds_bpermute_b32 v48, v39, v19
	s_waitcnt lgkmcnt(3)
	v_add_f32_e32 v18, v18, v44
	s_waitcnt lgkmcnt(2)
	v_add_f32_e32 v43, v43, v46
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v44, v45, v47
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v19, v19, v48
	ds_bpermute_b32 v45, v40, v18
	ds_bpermute_b32 v46, v40, v43
	ds_bpermute_b32 v47, v40, v44
	ds_bpermute_b32 v48, v40, v19
	s_waitcnt lgkmcnt(3)
	v_add_f32_e32 v18, v18, v45
	s_waitcnt lgkmcnt(2)
	v_add_f32_e32 v45, v43, v46
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v44, v44, v47
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v19, v19, v48
	ds_bpermute_b32 v43, v41, v18
	ds_bpermute_b32 v46, v41, v45
	ds_bpermute_b32 v47, v41, v44
	ds_bpermute_b32 v48, v41, v19
	s_waitcnt lgkmcnt(3)
	v_add_f32_e32 v43, v18, v43
	s_waitcnt lgkmcnt(2)
	v_add_f32_e32 v18, v45, v46
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v44, v44, v47
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v45, v19, v48
	ds_bpermute_b32 v48, v42, v43
	ds_bpermute_b32 v19, v42, v18
	ds_bpermute_b32 v46, v42, v44
	ds_bpermute_b32 v47, v42, v45
	s_and_saveexec_b64 s[40:41], s[6:7]
	s_cbranch_execz .LBB0_56
; %bb.58:                               ;   in Loop: Header=BB0_57 Depth=2
	s_lshl_b32 s21, s21, 4
	s_waitcnt lgkmcnt(3)
	v_add_f32_e32 v43, v43, v48
	v_cmp_lt_i32_e32 vcc, 0, v22
	s_and_saveexec_b64 s[12:13], vcc
	s_cbranch_execz .LBB0_64
; %bb.59:                               ;   in Loop: Header=BB0_57 Depth=2
	v_cmp_ne_u32_e32 vcc, 1, v22
                                        ; implicit-def: $vgpr43
	s_and_saveexec_b64 s[42:43], vcc
	s_xor_b64 s[42:43], exec, s[42:43]
	s_cbranch_execz .LBB0_61
; %bb.60:                               ;   in Loop: Header=BB0_57 Depth=2
	s_waitcnt lgkmcnt(1)
	v_add_f32_e32 v18, v44, v46
	s_waitcnt lgkmcnt(0)
	v_add_f32_e32 v19, v45, v47
	v_cndmask_b32_e64 v43, v19, v18, s[8:9]
                                        ; implicit-def: $vgpr18
                                        ; implicit-def: $vgpr19
.LBB0_61:                               ;   in Loop: Header=BB0_57 Depth=2
	s_andn2_saveexec_b64 s[42:43], s[42:43]
	s_cbranch_execz .LBB0_63
; %bb.62:                               ;   in Loop: Header=BB0_57 Depth=2
	s_waitcnt lgkmcnt(2)
	v_add_f32_e32 v43, v18, v19
.LBB0_63:                               ;   in Loop: Header=BB0_57 Depth=2
	s_or_b64 exec, exec, s[42:43]
.LBB0_64:                               ;   in Loop: Header=BB0_57 Depth=2
	s_or_b64 exec, exec, s[12:13]
	v_or_b32_e32 v18, s21, v27
	v_or_b32_e32 v18, s36, v18
	s_waitcnt lgkmcnt(2)
	v_mov_b32_e32 v19, s37
	v_cmp_gt_i64_e32 vcc, s[28:29], v[18:19]
	s_and_b64 exec, exec, vcc
	s_cbranch_execz .LBB0_56
; %bb.65:                               ;   in Loop: Header=BB0_57 Depth=2
	v_cmp_lt_i64_e32 vcc, v[18:19], v[8:9]
	v_cmp_ge_i64_e64 s[12:13], v[18:19], v[6:7]
	s_and_b64 vcc, s[12:13], vcc
	v_lshl_add_u64 v[44:45], v[18:19], 2, v[4:5]
	v_cndmask_b32_e32 v18, v31, v43, vcc
	global_store_dword v[44:45], v18, off
	s_branch .LBB0_56
.LBB0_66:
	s_endpgm
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel _Z14indexer_kernelILi32ELi1EEv7IdxArgs
		.amdhsa_group_segment_fixed_size 9472
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 72
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 81
		.amdhsa_next_free_sgpr 96
		.amdhsa_accum_offset 80
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.section	.text._Z14indexer_kernelILi32ELi1EEv7IdxArgs,"axG",@progbits,_Z14indexer_kernelILi32ELi1EEv7IdxArgs,comdat
.Lfunc_end0:
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .offset:         0
        .size:           72
        .value_kind:     by_value
    .group_segment_fixed_size: 9472
    .kernarg_segment_align: 8
    .kernarg_segment_size: 72
    .max_flat_workgroup_size: 64
    .name:           _Z14indexer_kernelILi32ELi1EEv7IdxArgs
    .private_segment_fixed_size: 0
    .sgpr_count:     51
    .sgpr_spill_count: 0
    .symbol:         _Z14indexer_kernelILi32ELi1EEv7IdxArgs.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     78
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx950
...
	.end_amdgpu_metadata
