/* Metadata block headers: a sealed block verifies; a flipped bit, a block read from the wrong
 * place, the wrong type or owner are each caught and named. */
#include "cfs_test.h"

static uint8_t blk[4096];

Test(block, sealed_block_verifies)
{
	const char *why = NULL;
	cfs_block_init(blk, sizeof blk, 1234, CFS_B_INODE, 1234);
	memset(blk + 100, 0xab, 50);
	cfs_block_seal(blk, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 1234, CFS_B_INODE, 1234, &why), 0);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 1234, CFS_B_INODE, 0, &why), 0, "owner 0: any");
}

Test(block, every_kind_of_damage_is_named)
{
	const char *why = NULL;
	cfs_block_init(blk, sizeof blk, 77, CFS_B_BUCKET, 9);
	cfs_block_seal(blk, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 78, CFS_B_BUCKET, 9, &why), -EIO);
	cr_assert_str_eq(why, "block belongs elsewhere (misdirected write)");
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_INODE, 9, &why), -EIO);
	cr_assert_str_eq(why, "wrong block type");
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 10, &why), -EIO);
	cr_assert_str_eq(why, "block belongs to another object");
	for (size_t bit = 0; bit < sizeof blk * 8; bit += 997) {
		blk[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 9, &why), -EIO,
			     "bit %zu flipped went unnoticed", bit);
		blk[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	memset(blk, 0, sizeof blk);
	cr_assert_eq(cfs_block_verify(blk, sizeof blk, 77, CFS_B_BUCKET, 9, &why), -EIO);
	cr_assert_str_eq(why, "not a CFS metadata block (bad magic)");
}
